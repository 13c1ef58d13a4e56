import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { createTestContext, type TestContext, waitFor } from './helpers/app.ts';
import { setupOwner, type TeamOwner } from './helpers/auth.ts';
import {
  buildSmtpAdapter,
  dashboardCall,
  dataOf,
  emailStatus,
  expectError,
  send,
} from './helpers/factories.ts';
import { createTeamWithKey } from './helpers/sending-team.ts';
import { startTestSmtpServer, type TestSmtpServer } from './helpers/smtp-server.ts';

/** Issue #10 "Send API": every field of POST /api/v1/send as a real SMTP server receives it. */
describe('send fields (issue #10)', () => {
  let ctx: TestContext;
  let smtp: TestSmtpServer;
  let other: TestSmtpServer;
  let owner: TeamOwner;
  let apiKey: string;
  let templateId: string;

  beforeAll(async () => {
    ctx = await createTestContext('postgres');
    smtp = await startTestSmtpServer();
    other = await startTestSmtpServer();
    await ctx.startWorkers();
  });
  // Every case gets a team of its own (CONVENTIONS.md): its key, its default adapter (the `smtp`
  // sink), its template and its suppressions. The app, database and SMTP sinks are the file's.
  beforeEach(async () => {
    ({
      owner,
      key: apiKey,
      templateId,
    } = await createTeamWithKey(ctx.app, {
      smtpPort: smtp.port,
      template: { name: 'Fields', subject: 'Template {{ first_name }}' },
    }));
  });

  afterAll(async () => {
    await ctx?.close();
    await smtp?.close();
    await other?.close();
  });

  const pdfBytes = Buffer.from(
    '%PDF-1.4\n% not really a PDF, but bytes to compare\n\u0000\u00ff\u0001',
    'latin1',
  );
  const csvBytes = Buffer.from('a,b\n1,2\n');

  const fullBody = (to: string) => ({
    templateId,
    to,
    variables: { first_name: 'Ada', order: 42 },
    cc: ['Carol <carol@example.test>', 'dave@example.test'],
    bcc: 'hidden@example.test',
    replyTo: 'Support <support@example.test>',
    subject: 'Order {{ order }} for {{ first_name }}',
    headers: { 'X-Campaign': 'spring', 'List-Unsubscribe': '<https://example.test/u>' },
    tags: { campaign: 'spring' },
    metadata: { orderId: '42', customer: 'ada' },
    attachments: [
      { filename: 'invoice.pdf', content: pdfBytes.toString('base64'), contentType: 'application/pdf' },
      { filename: 'rows.csv', content: csvBytes.toString('base64') },
    ],
  });

  async function messageTo(server: TestSmtpServer, recipient: string) {
    return waitFor(
      async () => server.messages.find((m) => m.envelopeTo.includes(recipient)),
      30_000,
      `a message to ${recipient}`,
    );
  }

  async function logOf(id: string) {
    return dataOf(await dashboardCall(ctx.app, owner, 'GET', `/api/logs/${id}`));
  }

  it('delivers cc, bcc (envelope only), replyTo, the subject override, headers and attachments', async () => {
    const response = await send(ctx.app, apiKey, fullBody('ada@example.test'));
    expect(response.statusCode, response.body).toBe(202);
    const { id } = response.json().data;
    const message = await messageTo(smtp, 'ada@example.test');
    const mail = message.parsed;

    expect(message.envelopeTo.sort()).toEqual(
      ['ada@example.test', 'carol@example.test', 'dave@example.test', 'hidden@example.test'].sort(),
    );
    const addresses = (field: typeof mail.cc) =>
      (Array.isArray(field) ? field : field ? [field] : []).flatMap((f) => f.value.map((v) => v.address));
    expect(addresses(mail.cc)).toEqual(['carol@example.test', 'dave@example.test']);
    expect(mail.bcc).toBeUndefined();
    expect(message.raw.toLowerCase()).not.toContain('hidden@example.test');
    expect(mail.replyTo?.value).toEqual([{ address: 'support@example.test', name: 'Support' }]);
    expect(mail.subject).toBe('Order 42 for Ada');
    expect(mail.headers.get('x-campaign')).toBe('spring');
    expect(message.raw).toContain('List-Unsubscribe: <https://example.test/u>');
    expect(mail.headers.get('x-postwright-email-id')).toBe(id);
    expect(mail.attachments.map((a) => a.filename)).toEqual(['invoice.pdf', 'rows.csv']);
    expect(mail.attachments[0]!.contentType).toBe('application/pdf');
    // Without a contentType the part is sent as application/octet-stream (mailparser then guesses from the name).
    expect(message.raw).toMatch(/Content-Type: application\/octet-stream; name=rows\.csv/);
    expect(mail.attachments[0]!.content.equals(pdfBytes)).toBe(true);
    expect(mail.attachments[1]!.content.equals(csvBytes)).toBe(true);

    await waitFor(async () =>
      (await emailStatus(ctx.app, apiKey, id)).status === 'sent' ? true : undefined,
    );
    const log = await logOf(id);
    expect(log).toMatchObject({
      subject: 'Order 42 for Ada',
      cc: ['Carol <carol@example.test>', 'dave@example.test'],
      bcc: ['hidden@example.test'],
      replyTo: ['Support <support@example.test>'],
      headers: { 'X-Campaign': 'spring', 'List-Unsubscribe': '<https://example.test/u>' },
      tags: { campaign: 'spring' },
      metadata: { orderId: '42', customer: 'ada' },
      attachments: [
        { filename: 'invoice.pdf', contentType: 'application/pdf', size: pdfBytes.length },
        { filename: 'rows.csv', contentType: 'application/octet-stream', size: csvBytes.length },
      ],
      scheduledAt: null,
    });
    // Re-rendering the log gives the subject that was sent (the override), not the template's.
    const rendered = await dataOf(await dashboardCall(ctx.app, owner, 'GET', `/api/logs/${id}/rendered`));
    expect(rendered.subject).toBe('Order 42 for Ada');
  });

  it("takes tags as a list of labels (issue #10's string list) and shows them on the log as sent", async () => {
    const response = await send(ctx.app, apiKey, {
      templateId,
      to: 'labels@example.test',
      tags: ['welcome', 'onboarding'],
    });
    expect(response.statusCode, response.body).toBe(202);
    expect((await logOf(response.json().data.id)).tags).toEqual(['welcome', 'onboarding']);
  });

  it('shows empty send fields on the log of a plain send', async () => {
    const response = await send(ctx.app, apiKey, { templateId, to: 'plain@example.test' });
    expect(response.statusCode, response.body).toBe(202);
    const log = await logOf(response.json().data.id);
    expect(log).toMatchObject({
      cc: [],
      bcc: [],
      replyTo: [],
      headers: {},
      tags: {},
      metadata: {},
      attachments: [],
    });
  });

  it('sends through the adapter named by adapterId, and refuses an adapter of no team of the caller', async () => {
    const otherAdapterId = (await buildSmtpAdapter(ctx.app, owner, other.port, { name: 'Other SMTP' })).id;
    const response = await send(ctx.app, apiKey, {
      templateId,
      to: 'routed@example.test',
      adapterId: otherAdapterId,
    });
    expect(response.statusCode, response.body).toBe(202);
    await messageTo(other, 'routed@example.test');
    expect(smtp.messages.some((m) => m.envelopeTo.includes('routed@example.test'))).toBe(false);
    expect((await logOf(response.json().data.id)).adapterId).toBe(otherAdapterId);

    // A resend goes through the adapter the original named, not the team's default.
    const suppression = await dataOf(
      await dashboardCall(ctx.app, owner, 'POST', '/api/suppressions', { address: 'rerouted@example.test' }),
      201,
    );
    const failing = await send(ctx.app, apiKey, {
      templateId,
      to: 'rerouted@example.test',
      adapterId: otherAdapterId,
    });
    const failedId = failing.json().data.id;
    await waitFor(async () => ((await logOf(failedId)).status === 'failed' ? true : undefined));
    await dataOf(await dashboardCall(ctx.app, owner, 'DELETE', `/api/suppressions/${suppression.id}`));
    await dataOf(await dashboardCall(ctx.app, owner, 'POST', `/api/logs/${failedId}/resend`), 202);
    await messageTo(other, 'rerouted@example.test');
    expect(smtp.messages.some((m) => m.envelopeTo.includes('rerouted@example.test'))).toBe(false);

    const stranger = await setupOwner(ctx.app);
    const foreign = await buildSmtpAdapter(ctx.app, stranger, smtp.port);
    const refused = expectError(
      await send(ctx.app, apiKey, { templateId, to: 'x@example.test', adapterId: foreign.id }),
      400,
      'VALIDATION_ERROR',
    );
    expect(refused.details.reason).toBe('UNKNOWN_ADAPTER');
  });

  it.each<[string, Record<string, unknown>, string]>([
    ['a From header', { headers: { From: 'evil@example.test' } }, 'body.headers'],
    ['a content-type header (any case)', { headers: { 'content-TYPE': 'text/plain' } }, 'body.headers'],
    ['each header that would break the message', { headers: { 'MIME-Version': '2.0' } }, 'body.headers'],
    ['a Bcc header', { headers: { Bcc: 'x@example.test' } }, 'body.headers'],
    ['a header value with CRLF', { headers: { 'X-Test': 'a\r\nBcc: x@example.test' } }, 'body.headers'],
    ['a header name with a colon', { headers: { 'X-A:b': 'v' } }, 'body.headers'],
    ['a header value with NUL', { headers: { 'X-Test': 'a\u0000b' } }, 'body.headers'],
    ['a subject with LF', { subject: 'Hi\nBcc: x@example.test' }, 'body.subject'],
    ['a cc address with CRLF', { cc: 'a@example.test\r\nBcc: x@example.test' }, 'body.cc'],
    ['a replyTo that is no mailbox', { replyTo: 'not an address' }, 'body.replyTo'],
    ['a group address in cc', { cc: 'Friends: a@example.test, b@example.test;' }, 'body.cc'],
    [
      'an attachment filename with CRLF',
      { attachments: [{ filename: 'a\r\n.txt', content: 'YQ==' }] },
      'body.attachments',
    ],
    [
      'attachment content that is not base64',
      { attachments: [{ filename: 'a.txt', content: 'not base64!' }] },
      'body.attachments',
    ],
    ['a tag value with CR', { tags: { a: 'x\ry' } }, 'body.tags'],
    // Issue #10's "string list" form of tags (review finding, session 16).
    ['a tag label with CR', { tags: ['ok', 'x\ry'] }, 'body.tags.1'],
    ['an empty tag label', { tags: [''] }, 'body.tags.0'],
    ['a tag label given twice', { tags: ['a', 'a'] }, 'body.tags'],
    ['51 tag labels', { tags: Array.from({ length: 51 }, (_, i) => `t${i}`) }, 'body.tags'],
    ['tags that are neither a list nor a map', { tags: 'welcome' }, 'body.tags'],
    ['metadata over 2 KB', { metadata: { big: 'x'.repeat(2100) } }, 'body.metadata'],
    [
      'a schedule more than 30 days ahead',
      { scheduledAt: new Date(Date.now() + 31 * 86_400_000).toISOString() },
      'body.scheduledAt',
    ],
    ['a schedule that is no ISO 8601 date', { scheduledAt: 'tomorrow' }, 'body.scheduledAt'],
  ])('refuses %s with 400 VALIDATION_ERROR', async (_name, fields, path) => {
    const error = expectError(
      await send(ctx.app, apiKey, { templateId, to: 'v@example.test', ...fields }),
      400,
      'VALIDATION_ERROR',
    );
    expect(error.details.issues.map((i: { path: string }) => i.path).join(' ')).toContain(path);
  });

  it('refuses a subject override that is not valid Liquid with 400 INVALID_TEMPLATE', async () => {
    const error = expectError(
      await send(ctx.app, apiKey, { templateId, to: 'liquid@example.test', subject: 'Hi {{ first_name ' }),
      400,
      'INVALID_TEMPLATE',
    );
    expect(error.details.issues[0].path).toBe('subject');
  });

  it('refuses more than 50 recipients across to, cc and bcc', async () => {
    const many = (prefix: string, n: number) =>
      Array.from({ length: n }, (_, i) => `${prefix}${i}@example.test`);
    const ok = await send(ctx.app, apiKey, {
      templateId,
      to: many('t', 20),
      cc: many('c', 20),
      bcc: many('b', 10),
    });
    expect(ok.statusCode, ok.body).toBe(202);
    const error = expectError(
      await send(ctx.app, apiKey, { templateId, to: many('t', 20), cc: many('c', 20), bcc: many('b', 11) }),
      400,
      'VALIDATION_ERROR',
    );
    expect(error.details.issues[0].message).toContain('at most 50 recipients');
  });

  it('refuses more than 10 attachments and more than 10 MB decoded', async () => {
    const file = { filename: 'a.txt', content: Buffer.from('a').toString('base64') };
    const tooMany = expectError(
      await send(ctx.app, apiKey, { templateId, to: 'f@example.test', attachments: Array(11).fill(file) }),
      400,
      'VALIDATION_ERROR',
    );
    expect(tooMany.details.issues[0].path).toBe('body.attachments');
    const half = Buffer.alloc(5 * 1024 * 1024 + 1, 1).toString('base64');
    const tooLarge = expectError(
      await send(ctx.app, apiKey, {
        templateId,
        to: 'f@example.test',
        attachments: [
          { filename: 'a.bin', content: half },
          { filename: 'b.bin', content: half },
        ],
      }),
      400,
      'VALIDATION_ERROR',
    );
    expect(tooLarge.details.issues[0].message).toContain('10485760 bytes');
  });

  it('accepts 10 MB of attachments (the request body is larger than the general 10 MB limit)', async () => {
    const five = Buffer.alloc(5 * 1024 * 1024, 7).toString('base64');
    const response = await send(ctx.app, apiKey, {
      templateId,
      to: 'big@example.test',
      attachments: [
        { filename: 'a.bin', content: five },
        { filename: 'b.bin', content: five },
      ],
    });
    expect(response.statusCode, response.body).toBe(202);
    const message = await messageTo(smtp, 'big@example.test');
    expect(message.parsed.attachments.map((a) => a.size)).toEqual([5 * 1024 * 1024, 5 * 1024 * 1024]);
  });

  it('fails an email to a suppressed address without calling the provider; resend keeps every field', async () => {
    const added = await dashboardCall(ctx.app, owner, 'POST', '/api/suppressions', {
      address: 'Blocked <BLOCKED@Example.test>',
      reason: 'complained',
    });
    const suppression = await dataOf(added, 201);
    expect(suppression).toMatchObject({ address: 'blocked@example.test', reason: 'complained' });

    // Suppressed as a cc recipient: the whole email fails.
    const response = await send(ctx.app, apiKey, {
      ...fullBody('keep@example.test'),
      cc: 'blocked@example.test',
    });
    expect(response.statusCode, response.body).toBe(202);
    const { id } = response.json().data;
    const failed = await waitFor(async () => {
      const log = await logOf(id);
      return log.status === 'failed' ? log : undefined;
    });
    expect(failed.errorMessage).toBe('suppressed: complained');
    expect(smtp.messages.some((m) => m.envelopeTo.includes('keep@example.test'))).toBe(false);

    expectError(
      await dashboardCall(ctx.app, owner, 'POST', '/api/suppressions', { address: 'blocked@example.test' }),
      409,
      'ALREADY_EXISTS',
    );
    const listed = await dataOf(await dashboardCall(ctx.app, owner, 'GET', '/api/suppressions'));
    expect(listed.items.map((s: { address: string }) => s.address)).toEqual(['blocked@example.test']);
    await dataOf(await dashboardCall(ctx.app, owner, 'DELETE', `/api/suppressions/${suppression.id}`));
    expectError(
      await dashboardCall(ctx.app, owner, 'DELETE', `/api/suppressions/${suppression.id}`),
      404,
      'NOT_FOUND',
    );

    const resent = await dataOf(await dashboardCall(ctx.app, owner, 'POST', `/api/logs/${id}/resend`), 202);
    const message = await messageTo(smtp, 'keep@example.test');
    const mail = message.parsed;
    expect(message.envelopeTo.sort()).toEqual([
      'blocked@example.test',
      'hidden@example.test',
      'keep@example.test',
    ]);
    expect(mail.subject).toBe('Order 42 for Ada');
    expect(mail.replyTo?.value[0]?.address).toBe('support@example.test');
    expect(mail.headers.get('x-campaign')).toBe('spring');
    expect(mail.attachments[0]!.content.equals(pdfBytes)).toBe(true);
    expect(mail.attachments[1]!.content.equals(csvBytes)).toBe(true);
    const log = await logOf(resent.id);
    expect(log).toMatchObject({
      tags: { campaign: 'spring' },
      metadata: { orderId: '42', customer: 'ada' },
      attachments: [{ filename: 'invoice.pdf' }, { filename: 'rows.csv' }],
    });
  });
});

describe('send fields in the API reference', () => {
  let ctx: TestContext;
  beforeAll(async () => {
    ctx = await createTestContext('postgres');
  });
  afterAll(() => ctx?.close());

  it('documents the send fields, the Idempotency-Key header, batch, cancel and suppressions', async () => {
    const response = await ctx.app.inject({ method: 'GET', url: '/docs/json' });
    expect(response.statusCode).toBe(200);
    const doc = response.json();
    const send = doc.paths['/api/v1/send'].post;
    const properties = send.requestBody.content['application/json'].schema.properties;
    for (const field of [
      'cc',
      'bcc',
      'replyTo',
      'subject',
      'adapterId',
      'headers',
      'tags',
      'metadata',
      'attachments',
      'scheduledAt',
    ]) {
      expect(properties, field).toHaveProperty(field);
    }
    expect(properties.attachments.items.properties).toHaveProperty('content');
    expect(send.parameters.map((p: { name: string; in: string }) => `${p.in}:${p.name}`)).toContain(
      'header:idempotency-key',
    );
    expect(
      doc.paths['/api/v1/send/batch'].post.requestBody.content['application/json'].schema.properties,
    ).toHaveProperty('emails');
    expect(doc.paths['/api/v1/{id}/cancel'].post).toBeDefined();
    expect(Object.keys(doc.paths['/api/suppressions']).sort()).toEqual(['get', 'post']);
    expect(doc.paths['/api/suppressions/{id}'].delete).toBeDefined();
    const log =
      doc.paths['/api/logs/{id}'].get.responses['200'].content['application/json'].schema.properties.data
        .properties;
    for (const field of ['cc', 'bcc', 'replyTo', 'tags', 'metadata', 'attachments', 'scheduledAt']) {
      expect(log, field).toHaveProperty(field);
    }
  });
});
