import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { createTestContext, type TestContext, waitFor } from './helpers/app.ts';
import { expectError, send } from './helpers/factories.ts';
import { createTeamWithKey } from './helpers/sending-team.ts';
import { startTestSmtpServer, type TestSmtpServer } from './helpers/smtp-server.ts';

/**
 * Issue #10 send fields, the text rules: no value that becomes a header holds a control character
 * (C0 but tab, DEL, C1, U+2028, U+2029), other Unicode goes through; headers the message is built
 * from or transfer agents write are refused; text the database cannot look up (NUL, unpaired
 * surrogates) is a VALIDATION_ERROR naming the field; `scheduledAt` is not before 1970.
 */
describe('send fields: text rules', () => {
  let ctx: TestContext;
  let smtp: TestSmtpServer;
  let apiKey: string;
  let templateId: string;

  beforeAll(async () => {
    ctx = await createTestContext('postgres');
    smtp = await startTestSmtpServer();
    await ctx.startWorkers();
  });
  // Every case gets a team of its own (CONVENTIONS.md); the app, database and SMTP sink are the file's.
  beforeEach(async () => {
    ({ key: apiKey, templateId } = await createTeamWithKey(ctx.app, { smtpPort: smtp.port }));
  });
  afterAll(async () => {
    await ctx?.close();
    await smtp?.close();
  });

  const controls: [string, string][] = [
    ['NUL', '\u0000'],
    ['VT', '\u000b'],
    ['ESC', '\u001b'],
    ['DEL', '\u007f'],
    ['NEL (C1)', '\u0085'],
    ['U+009B (C1 CSI)', '\u009b'],
    ['LINE SEPARATOR', '\u2028'],
    ['PARAGRAPH SEPARATOR', '\u2029'],
  ];
  const fieldsWith = (c: string): [string, Record<string, unknown>, string][] => [
    ['a to display name', { to: `Ada${c}Lovelace <v@example.test>` }, 'body.to'],
    ['a cc display name', { cc: `Carol${c}Jones <c@example.test>` }, 'body.cc'],
    ['a bcc display name', { bcc: [`Bob${c} <b@example.test>`] }, 'body.bcc'],
    ['a replyTo display name', { replyTo: `Support${c}Desk <s@example.test>` }, 'body.replyTo'],
    ['a from display name', { from: `Shop${c} <shop@example.test>` }, 'body.from'],
    ['a header value', { headers: { 'X-Test': `a${c}b` } }, 'body.headers.X-Test'],
    ['the subject', { subject: `Hi${c}there` }, 'body.subject'],
    [
      'an attachment filename',
      { attachments: [{ filename: `a${c}b.txt`, content: 'YQ==' }] },
      'body.attachments.0.filename',
    ],
    ['a tag value', { tags: { campaign: `spring${c}sale` } }, 'body.tags.campaign'],
  ];
  const controlCases = controls.flatMap(([name, c]) =>
    fieldsWith(c).map(([field, fields, path]): [string, Record<string, unknown>, string] => [
      `${name} in ${field}`,
      fields,
      path,
    ]),
  );

  it.each(controlCases)(
    'refuses %s with 400 VALIDATION_ERROR naming the field',
    async (_name, fields, path) => {
      const error = expectError(
        await send(ctx.app, apiKey, { templateId, to: 'v@example.test', ...fields }),
        400,
        'VALIDATION_ERROR',
      );
      expect(error.details.issues.map((i: { path: string }) => i.path)).toContain(path);
    },
  );

  it.each([
    'Content-ID',
    'content-id',
    'Content-Language',
    'Content-Description',
    'Resent-From',
    'resent-to',
    'Resent-Message-ID',
    'Received',
    'DKIM-Signature',
    'dkim-signature',
    'Return-Path',
    'Content-Type',
    'X-SG-ID',
    'x-sg-eid',
  ])('refuses the header %s with 400 VALIDATION_ERROR', async (name) => {
    const error = expectError(
      await send(ctx.app, apiKey, { templateId, to: 'h@example.test', headers: { [name]: 'x' } }),
      400,
      'VALIDATION_ERROR',
    );
    expect(error.details.issues.map((i: { path: string }) => i.path).join(' ')).toContain('body.headers');
  });

  it.each<[string, Record<string, unknown>, string]>([
    ['NUL in templateId', { templateId: 'x\u0000' }, 'body.templateId'],
    ['an unpaired surrogate in templateId', { templateId: '\ud800x' }, 'body.templateId'],
    ['NUL in adapterId', { adapterId: 'ad\u0000' }, 'body.adapterId'],
    [
      'NUL in a PDF attachment templateId',
      { pdfAttachments: [{ templateId: 'p\u0000', filename: 'a' }] },
      'body.pdfAttachments.0.templateId',
    ],
    [
      'NUL in a PDF attachment filename',
      { pdfAttachments: [{ templateId: 'some-template', filename: 'a\u0000b' }] },
      'body.pdfAttachments.0.filename',
    ],
    ['an unpaired surrogate in metadata', { metadata: { note: 'a\udc00' } }, 'body.metadata.note'],
    // Review finding, session 16: PostgreSQL refused these in the shared accept transaction.
    ['NUL in a variable', { variables: { first_name: 'a\u0000b' } }, 'body.variables.first_name'],
    ['NUL in a nested variable key', { variables: { order: { 'a\u0000': 1 } } }, 'body.variables.order'],
    ['NUL in metadata', { metadata: { note: 'x\u0000' } }, 'body.metadata.note'],
    ['a schedule in year 0', { scheduledAt: '0000-01-01T00:00:00Z' }, 'body.scheduledAt'],
    ['a schedule before 1970', { scheduledAt: '1969-12-31T23:59:59Z' }, 'body.scheduledAt'],
  ])('refuses %s with 400 VALIDATION_ERROR naming the field', async (_name, fields, path) => {
    const error = expectError(
      await send(ctx.app, apiKey, { templateId, to: 'n@example.test', ...fields }),
      400,
      'VALIDATION_ERROR',
    );
    expect(error.details.issues.map((i: { path: string }) => i.path)).toContain(path);
  });

  it('refuses a subject that renders to more than 998 characters (SUBJECT_TOO_LONG); 998 pass', async () => {
    // Review finding, session 16: variables made a 5,003-character subject, stored on the log and
    // sent to Postmark, which refuses over 2,000.
    const body = (length: number) => ({
      templateId,
      to: 's@example.test',
      subject: 'Hi {{ name }}',
      variables: { name: 'x'.repeat(length - 3) },
    });
    const error = expectError(await send(ctx.app, apiKey, body(999)), 400, 'VALIDATION_ERROR');
    expect(error.details).toMatchObject({ reason: 'SUBJECT_TOO_LONG', issues: [{ path: 'body.subject' }] });
    const accepted = await send(ctx.app, apiKey, body(998));
    expect(accepted.statusCode, accepted.body).toBe(202);
  });

  it('accepts a past schedule from 1970 on and sends it at once', async () => {
    const response = await send(ctx.app, apiKey, {
      templateId,
      to: 'epoch@example.test',
      scheduledAt: '1970-01-01T00:00:00Z',
    });
    expect(response.statusCode, response.body).toBe(202);
    await waitFor(async () => smtp.messages.find((m) => m.envelopeTo.includes('epoch@example.test')), 30_000);
  });

  it('delivers accents, CJK and emoji in display names, subject, headers, tags and file names', async () => {
    const response = await send(ctx.app, apiKey, {
      templateId,
      to: '"Zoë Ångström" <zoe@example.test>',
      cc: '山田 太郎 <yamada@example.test>',
      replyTo: 'Ünïcødé 🚀 <reply@example.test>',
      subject: 'Résumé für 山田 🚀\tdone',
      headers: { 'X-Note': 'naïve café 漢字 🎉', 'List-Unsubscribe': '<https://example.test/u>' },
      tags: { campaign: 'été 🌞' },
      attachments: [{ filename: 'reçu 領収書 🧾.txt', content: Buffer.from('ok').toString('base64') }],
    });
    expect(response.statusCode, response.body).toBe(202);
    const message = await waitFor(
      async () => smtp.messages.find((m) => m.envelopeTo.includes('zoe@example.test')),
      30_000,
      'the Unicode message',
    );
    const mail = message.parsed;
    expect(mail.subject).toBe('Résumé für 山田 🚀\tdone');
    // mailparser leaves an unknown header's RFC 2047 encoded words (base64 here) as they came.
    const decoded = String(mail.headers.get('x-note')).replace(/=\?UTF-8\?B\?([^?]*)\?=\s*/gi, (_, b64) =>
      Buffer.from(b64, 'base64').toString('utf8'),
    );
    expect(decoded).toBe('naïve café 漢字 🎉');
    const to = Array.isArray(mail.to) ? mail.to[0] : mail.to;
    expect(to?.value).toEqual([{ address: 'zoe@example.test', name: 'Zoë Ångström' }]);
    const cc = Array.isArray(mail.cc) ? mail.cc[0] : mail.cc;
    expect(cc?.value).toEqual([{ address: 'yamada@example.test', name: '山田 太郎' }]);
    expect(mail.replyTo?.value).toEqual([{ address: 'reply@example.test', name: 'Ünïcødé 🚀' }]);
    expect(mail.attachments.map((a) => a.filename)).toEqual(['reçu 領収書 🧾.txt']);
  });
});
