import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { createTestContext, type TestContext } from './helpers/app.ts';
import { addTeamMember, sessionHeaders, setupOwner, type TeamOwner } from './helpers/auth.ts';
import { buildTemplate, expectError } from './helpers/factories.ts';
import {
  deleteUpload,
  GIF_1X1,
  JPEG_1X1,
  multipartBody,
  PNG_1X1,
  pathOf,
  SVG,
  uploadImage,
  WEBP_1X1,
} from './helpers/uploads.ts';

const FIVE_MB = 5 * 1024 * 1024;

/** A PNG padded with zeros after IEND to exactly `size` bytes (decoders ignore trailing bytes). */
function pngOfSize(size: number): Buffer {
  return Buffer.concat([PNG_1X1, Buffer.alloc(size - PNG_1X1.length)]);
}

describe('image uploads on the local disk', () => {
  let ctx: TestContext;
  let owner: TeamOwner;

  beforeAll(async () => {
    ctx = await createTestContext('postgres');
  });
  // Every case gets a team of its own (CONVENTIONS.md); the app and database are the file's.
  beforeEach(async () => {
    owner = await setupOwner(ctx.app);
  });
  afterAll(async () => {
    await ctx?.close();
  });

  it.each([
    ['png', PNG_1X1, 'image/png'],
    ['jpg', JPEG_1X1, 'image/jpeg'],
    ['gif', GIF_1X1, 'image/gif'],
    ['webp', WEBP_1X1, 'image/webp'],
  ])('stores a %s and serves the same bytes publicly at its url', async (extension, bytes, contentType) => {
    // The client's name and type are deliberately wrong: the type comes from the content.
    const response = await uploadImage(ctx.app, owner, {
      filename: 'picture.bin',
      type: 'application/octet-stream',
      bytes,
    });
    expect(response.statusCode, response.body).toBe(201);
    const { success, data } = response.json();
    expect(success).toBe(true);
    expect(Object.keys(data).sort()).toEqual(['contentType', 'key', 'size', 'url']);
    expect(data.contentType).toBe(contentType);
    expect(data.size).toBe(bytes.length);
    expect(data.key).toMatch(new RegExp(`^${owner.teamId}/img_[0-9a-z]{26}\\.${extension}$`));
    expect(data.url).toBe(`${ctx.config.BASE_URL}/files/${data.key}`);

    const file = await ctx.app.inject({ method: 'GET', url: pathOf(data.url) }); // no cookie: public
    expect(file.statusCode).toBe(200);
    expect(file.rawPayload.equals(bytes)).toBe(true);
    expect(file.headers['content-type']).toBe(contentType);
    expect(file.headers['content-length']).toBe(String(bytes.length));
    expect(file.headers['x-content-type-options']).toBe('nosniff');
    expect(file.headers['cache-control']).toMatch(/max-age=31536000/);

    const head = await ctx.app.inject({ method: 'HEAD', url: pathOf(data.url) });
    expect(head.statusCode).toBe(200);
    expect(head.headers['content-type']).toBe(contentType);
    expect(head.rawPayload.length).toBe(0);
  });

  it('gives every upload its own key', async () => {
    const first = (await uploadImage(ctx.app, owner, { filename: 'a.png', bytes: PNG_1X1 })).json().data;
    const second = (await uploadImage(ctx.app, owner, { filename: 'a.png', bytes: PNG_1X1 })).json().data;
    expect(first.key).not.toBe(second.key);
  });

  it('refuses SVG, text named .png and other non-images with 400 INVALID_FILE_TYPE', async () => {
    const cases = [
      { filename: 'logo.svg', type: 'image/svg+xml', bytes: SVG },
      { filename: 'logo.png', type: 'image/png', bytes: SVG },
      { filename: 'photo.png', type: 'image/png', bytes: Buffer.from('just some text, not an image\n') },
      {
        filename: 'doc.png',
        type: 'image/png',
        bytes: Buffer.from('%PDF-1.4\n%âãÏÓ\n1 0 obj\n<<>>\nendobj\n'),
      },
      { filename: 'empty.png', type: 'image/png', bytes: Buffer.alloc(0) },
    ];
    for (const part of cases) {
      const error = expectError(await uploadImage(ctx.app, owner, part), 400, 'INVALID_FILE_TYPE');
      expect(error.details.allowed).toEqual(['image/png', 'image/jpeg', 'image/gif', 'image/webp']);
    }
    expect(
      expectError(await uploadImage(ctx.app, owner, cases[3]!), 400, 'INVALID_FILE_TYPE').details.detected,
    ).toBe('application/pdf');
  });

  it('accepts exactly 5 MB and refuses 5 MB + 1 byte with 400 FILE_TOO_LARGE', async () => {
    const atLimit = await uploadImage(ctx.app, owner, { filename: 'big.png', bytes: pngOfSize(FIVE_MB) });
    expect(atLimit.statusCode, atLimit.body).toBe(201);
    expect(atLimit.json().data.size).toBe(FIVE_MB);

    const over = await uploadImage(ctx.app, owner, { filename: 'big.png', bytes: pngOfSize(FIVE_MB + 1) });
    expect(expectError(over, 400, 'FILE_TOO_LARGE').details.maxBytes).toBe(FIVE_MB);
  });

  it('honours UPLOAD_MAX_BYTES, keeps files in DATA_DIR/files and stores nothing for a refused file', async () => {
    const dataDir = mkdtempSync(path.join(tmpdir(), 'postwright-data-'));
    const small = await createTestContext('postgres', { UPLOAD_MAX_BYTES: '100', DATA_DIR: dataDir });
    try {
      const team = await setupOwner(small.app);
      const stored = await uploadImage(small.app, team, { filename: 'a.png', bytes: pngOfSize(100) });
      expect(stored.statusCode, stored.body).toBe(201);
      const refused = [
        await uploadImage(small.app, team, { filename: 'a.png', bytes: pngOfSize(101) }),
        await uploadImage(small.app, team, { filename: 'a.png', bytes: Buffer.from('not an image') }),
      ];
      expectError(refused[0]!, 400, 'FILE_TOO_LARGE');
      expectError(refused[1]!, 400, 'INVALID_FILE_TYPE');

      const [, name] = stored.json().data.key.split('/');
      const visible = readdirSync(path.join(dataDir, 'files', team.teamId)).filter((f) => !f.startsWith('.'));
      expect(visible).toEqual([name]);
      expect(readFileSync(path.join(dataDir, 'files', team.teamId, name)).equals(pngOfSize(100))).toBe(true);
    } finally {
      await small.close();
      rmSync(dataDir, { recursive: true, force: true });
    }
  });

  it('requires a session (401), the templates:update permission (403) and a file in the field "file"', async () => {
    expectError(await uploadImage(ctx.app, null, { filename: 'a.png', bytes: PNG_1X1 }), 401, 'UNAUTHORIZED');

    const viewer = await addTeamMember(ctx.app, owner, 'viewer');
    const forbidden = expectError(
      await uploadImage(ctx.app, viewer, { filename: 'a.png', bytes: PNG_1X1 }),
      403,
      'FORBIDDEN',
    );
    expect(forbidden.details.permission).toBe('templates:update');

    const member = await addTeamMember(ctx.app, owner, 'member');
    expect((await uploadImage(ctx.app, member, { filename: 'a.png', bytes: PNG_1X1 })).statusCode).toBe(201);

    const wrongField = expectError(
      await uploadImage(ctx.app, owner, { name: 'image', filename: 'a.png', bytes: PNG_1X1 }),
      400,
      'VALIDATION_ERROR',
    );
    expect(wrongField.details.issues[0].path).toBe('body.file');

    const json = await ctx.app.inject({
      method: 'POST',
      url: '/api/uploads/images',
      headers: sessionHeaders(ctx.app, owner),
      payload: { file: 'iVBORw0KGgo=' },
    });
    expect(expectError(json, 400, 'INVALID_INPUT').details.reason).toBe('UNSUPPORTED_CONTENT_TYPE');
  });

  it('keeps multipart to the upload route: other routes still take JSON only', async () => {
    const template = await buildTemplate(ctx.app, owner, { name: 'Still JSON' });
    expect(template.id).toMatch(/^tpl_/);

    const { payload, headers } = await multipartBody([{ filename: 'a.png', bytes: PNG_1X1 }]);
    const response = await ctx.app.inject({
      method: 'POST',
      url: '/api/templates',
      headers: { ...headers, ...sessionHeaders(ctx.app, owner) },
      payload,
    });
    expect(expectError(response, 400, 'INVALID_INPUT').details.reason).toBe('UNSUPPORTED_CONTENT_TYPE');
  });

  it('documents the upload routes in the OpenAPI document', async () => {
    const response = await ctx.app.inject({ method: 'GET', url: '/docs/json' });
    expect(response.statusCode).toBe(200);
    const paths = response.json().paths;
    expect(Object.keys(paths)).toEqual(
      expect.arrayContaining(['/api/uploads/images', '/api/uploads/images/{key}', '/files/{path}']),
    );
    expect(paths['/api/uploads/images'].post.requestBody.content).toEqual({
      'multipart/form-data': {
        schema: expect.objectContaining({
          properties: { file: expect.objectContaining({ format: 'binary' }) },
        }),
      },
    });
  });

  it('answers 404 in the envelope for unknown and malformed file paths', async () => {
    for (const url of [
      `/files/${owner.teamId}/img_missing.png`,
      '/files/',
      '/files/..%2F..%2Fetc%2Fpasswd',
      '/files/%2E%2E/%2E%2E/etc/passwd',
      '/files/%2Fetc%2Fpasswd',
      `/files/${owner.teamId}`,
    ]) {
      expectError(await ctx.app.inject({ method: 'GET', url }), 404, 'NOT_FOUND');
    }
    // The local disk keeps each file's content type in a hidden sidecar: it is not a file to serve.
    const { key } = (await uploadImage(ctx.app, owner, { filename: 'a.png', bytes: PNG_1X1 })).json().data;
    const [team, name] = key.split('/');
    expectError(
      await ctx.app.inject({ method: 'GET', url: `/files/${team}/.${name}.meta.json` }),
      404,
      'NOT_FOUND',
    );
  });

  it("deletes the team's own file, after which it is gone; another team's key is 404", async () => {
    const { key, url } = (await uploadImage(ctx.app, owner, { filename: 'a.png', bytes: PNG_1X1 })).json()
      .data;

    const other = await setupOwner(ctx.app);
    expectError(await deleteUpload(ctx.app, other, key), 404, 'NOT_FOUND');
    expect((await ctx.app.inject({ method: 'GET', url: pathOf(url) })).statusCode).toBe(200);

    const viewer = await addTeamMember(ctx.app, owner, 'viewer');
    expectError(await deleteUpload(ctx.app, viewer, key), 403, 'FORBIDDEN');

    const response = await deleteUpload(ctx.app, owner, key);
    expect(response.statusCode, response.body).toBe(200);
    expect(response.json()).toEqual({ success: true });

    expectError(await ctx.app.inject({ method: 'GET', url: pathOf(url) }), 404, 'NOT_FOUND');
    expectError(await deleteUpload(ctx.app, owner, key), 404, 'NOT_FOUND');
    expectError(
      await deleteUpload(ctx.app, owner, `${owner.teamId}/../${other.teamId}/x.png`),
      404,
      'NOT_FOUND',
    );
  });

  it("deletes uploaded images only, never the service's own files under the team's prefix", async () => {
    // Review finding, session 14: any key under `<teamId>/` was deletable, so the route removed a
    // template's thumbnail while the template still showed it.
    const thumbnail = `${owner.teamId}/thumbnails/tpl_01jz0000000000000000000000-0123456789abcdef.png`;
    await ctx.app.ctx.storage.put(thumbnail, PNG_1X1, 'image/png');
    const url = ctx.app.ctx.storage.publicUrl(thumbnail);
    expectError(await deleteUpload(ctx.app, owner, thumbnail), 404, 'NOT_FOUND');
    expect((await ctx.app.inject({ method: 'GET', url: pathOf(url) })).statusCode).toBe(200);
  });
});
