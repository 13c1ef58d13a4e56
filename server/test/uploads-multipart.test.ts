import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestContext, type TestContext } from './helpers/app.ts';
import { sessionHeaders, setupOwner, type TeamOwner } from './helpers/auth.ts';
import { expectError } from './helpers/factories.ts';
import { multipartBody, PNG_1X1 } from './helpers/uploads.ts';

/** Malformed multipart/form-data bodies are the client's fault: 400, never 500 (busboy's parse errors). */
describe('image uploads with malformed multipart bodies', () => {
  let ctx: TestContext;
  let owner: TeamOwner;

  beforeAll(async () => {
    ctx = await createTestContext('postgres');
    owner = await setupOwner(ctx.app);
  });
  afterAll(async () => {
    await ctx?.close();
  });

  function upload(contentType: string, payload: Buffer) {
    return ctx.app.inject({
      method: 'POST',
      url: '/api/uploads/images',
      headers: { ...sessionHeaders(ctx.app, owner), 'content-type': contentType },
      payload,
    });
  }

  it('answers 400 INVALID_INPUT (MALFORMED_MULTIPART) for multipart/form-data without a boundary', async () => {
    const { payload } = await multipartBody([{ filename: 'a.png', bytes: PNG_1X1 }]);
    const response = await upload('multipart/form-data', payload);
    const error = expectError(response, 400, 'INVALID_INPUT');
    expect(error.details).toEqual({ reason: 'MALFORMED_MULTIPART' });
  });

  it('answers 400 for a boundary longer than RFC 2046 allows (over 252 characters was a 500), and takes 70', async () => {
    const form = (boundary: string) =>
      Buffer.concat([
        Buffer.from(
          `--${boundary}\r\nContent-Disposition: form-data; name="file"; filename="a.png"\r\nContent-Type: image/png\r\n\r\n`,
        ),
        PNG_1X1,
        Buffer.from(`\r\n--${boundary}--\r\n`),
      ]);
    for (const boundary of ['b'.repeat(71), 'b'.repeat(253), 'b'.repeat(2000)]) {
      for (const contentType of [
        `multipart/form-data; boundary=${boundary}`,
        `multipart/form-data; boundary="${boundary}"`,
      ]) {
        const response = await upload(contentType, form(boundary));
        const error = expectError(response, 400, 'INVALID_INPUT');
        expect(error.details).toEqual({ reason: 'MALFORMED_MULTIPART' });
      }
    }
    const longest = 'b'.repeat(70);
    const accepted = await upload(`multipart/form-data; boundary=${longest}`, form(longest));
    expect(accepted.statusCode, accepted.body).toBe(201);
  });

  it('answers 400 INVALID_INPUT (MALFORMED_MULTIPART) for a truncated body', async () => {
    const { payload, headers } = await multipartBody([{ filename: 'a.png', bytes: PNG_1X1 }]);
    // Without the closing boundary, and cut off inside the file's bytes.
    for (const cut of [payload.length - 20, payload.length - PNG_1X1.length + 10]) {
      const response = await upload(headers['content-type'], payload.subarray(0, cut));
      const error = expectError(response, 400, 'INVALID_INPUT');
      expect(error.details).toEqual({ reason: 'MALFORMED_MULTIPART' });
    }
  });

  it('still stores a well-formed upload', async () => {
    const { payload, headers } = await multipartBody([{ filename: 'a.png', bytes: PNG_1X1 }]);
    const response = await upload(headers['content-type'], payload);
    expect(response.statusCode, response.body).toBe(201);
  });
});
