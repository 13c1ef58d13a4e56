import { sql } from 'drizzle-orm';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { acceptSendBatch } from '../src/modules/emails/batch-send.service.ts';
import type { SendInput } from '../src/modules/emails/emails.schema.ts';
import { createTestContext, type TestContext } from './helpers/app.ts';
import type { TeamOwner } from './helpers/auth.ts';
import { createTeamWithKey } from './helpers/sending-team.ts';
import { closedPort } from './helpers/smtp-server.ts';

/**
 * Issue #10: POST /api/v1/send/batch answers one result per item, in order, whatever one item
 * holds: text the database cannot look up fails that item alone, never the whole batch.
 */
describe('batch send: one result per item', () => {
  let ctx: TestContext;
  let owner: TeamOwner;
  let apiKey: string;
  let keyId: string;
  let templateId: string;

  // Workers are not started: the emails stay queued, only what the API accepted is counted.
  beforeAll(async () => {
    // A renderer address (nothing listens): PDF attachments are resolved, so their errors show.
    ctx = await createTestContext('postgres', { PDF_RENDERER_URL: `http://127.0.0.1:${await closedPort()}` });
  });
  // Every case gets a team of its own (CONVENTIONS.md); the app and database are the file's.
  beforeEach(async () => {
    ({ owner, key: apiKey, keyId, templateId } = await createTeamWithKey(ctx.app));
  });
  afterAll(() => ctx?.close());

  const batch = (emails: unknown[]) =>
    ctx.app.inject({
      method: 'POST',
      url: '/api/v1/send/batch',
      headers: { 'x-api-key': apiKey },
      payload: { emails },
    });

  /** The addresses this case's team has emails to, sorted. */
  async function recipients(): Promise<string[]> {
    const result = (await ctx.app.ctx.database.db.execute(
      sql`select unnest(to_addresses) as address from email_logs where team_id = ${owner.teamId}`,
    )) as unknown as { rows: { address: string }[] };
    return result.rows.map((row) => row.address).sort();
  }

  it('answers NUL in templateId, adapterId and PDF attachments as that item’s VALIDATION_ERROR', async () => {
    const response = await batch([
      { templateId, to: 'first@example.test' },
      { templateId: 'x\u0000', to: 'nul-template@example.test' },
      { templateId, to: 'nul-adapter@example.test', adapterId: 'ad\u0000' },
      { templateId, to: 'nul-pdf@example.test', pdfAttachments: [{ templateId: 'p\u0000', filename: 'a' }] },
      { templateId, to: 'nul-name@example.test', pdfAttachments: [{ templateId, filename: 'a\u0000b' }] },
      { templateId, to: 'last@example.test' },
    ]);
    expect(response.statusCode, response.body).toBe(202);
    const results = response.json().data.results;
    expect(results).toHaveLength(6);
    expect(results[0]).toMatchObject({ status: 'queued' });
    expect(results[5]).toMatchObject({ status: 'queued' });
    const paths = [
      'body.emails.1.templateId',
      'body.emails.2.adapterId',
      'body.emails.3.pdfAttachments.0.templateId',
      'body.emails.4.pdfAttachments.0.filename',
    ];
    for (const [offset, path] of paths.entries()) {
      const { error } = results[offset + 1];
      expect(error.code, JSON.stringify(error)).toBe('VALIDATION_ERROR');
      expect(error.details.issues.map((i: { path: string }) => i.path)).toContain(path);
    }
    expect(await recipients()).toEqual(['first@example.test', 'last@example.test']);
  });

  it("names the item's index in the paths of errors the send path finds after the schema", async () => {
    // Review finding, session 16: SUBJECT_TOO_LONG answered `body.subject` in a batch, NO such
    // adapter `body.adapterId`: which item?
    const response = await batch([
      { templateId, to: 'ok@example.test' },
      { templateId, to: 'long@example.test', subject: '{{ x }}', variables: { x: 'a'.repeat(1200) } },
      { templateId, to: 'adapter@example.test', adapterId: 'ad_nope' },
    ]);
    expect(response.statusCode, response.body).toBe(202);
    const results = response.json().data.results;
    expect(results[0]).toMatchObject({ status: 'queued' });
    expect(results[1].error.details).toMatchObject({
      reason: 'SUBJECT_TOO_LONG',
      issues: [{ path: 'body.emails.1.subject' }],
    });
    expect(results[2].error.details.issues.map((i: { path: string }) => i.path)).toEqual([
      'body.emails.2.adapterId',
    ]);
    // A PDF attachment's INVALID_TEMPLATE names its path in details.path.
    const pdf = await batch([
      { templateId, to: 'ok2@example.test' },
      {
        templateId,
        to: 'pdf@example.test',
        pdfAttachments: [{ templateId: 'no-such-template', filename: 'a.pdf' }],
      },
    ]);
    const pdfError = pdf.json().data.results[1].error;
    expect(pdfError.code, JSON.stringify(pdfError)).toBe('INVALID_TEMPLATE');
    expect(JSON.stringify(pdfError.details)).toContain('body.emails.1.pdfAttachments.0');
    expect(JSON.stringify(pdfError.details)).not.toMatch(/"body\.pdfAttachments/);
  });

  it('answers a database refusal while preparing one item as that item’s INVALID_INPUT', async () => {
    // A schema that lets NUL through, so the template and adapter lookups meet the database's refusal.
    const permissive = z.looseObject({
      templateId: z.string(),
      to: z.string(),
    }) as unknown as z.ZodType<SendInput>;
    const results = await acceptSendBatch(
      ctx.app.ctx,
      { teamId: owner.teamId, apiKeyId: keyId },
      [
        { templateId, to: 'ok@example.test' },
        { templateId: 'x\u0000', to: 'bad@example.test' },
        { templateId, to: 'ok2@example.test' },
      ],
      permissive,
    );
    expect(results).toHaveLength(3);
    expect(results[0]).toMatchObject({ status: 'queued' });
    expect(results[1]).toEqual({
      error: {
        code: 'INVALID_INPUT',
        message: 'The request contains text or data the database cannot store',
        details: { reason: 'UNSUPPORTED_DATA' },
      },
    });
    expect(results[2]).toMatchObject({ status: 'queued' });
    expect(await recipients()).toEqual(['ok2@example.test', 'ok@example.test']);
  });
});
