import { count, eq } from 'drizzle-orm';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { emailLogs } from '../src/db/schema/index.ts';
import { EMAIL_SEND_FAILED_JOB, EMAIL_SEND_JOB } from '../src/jobs/definitions.ts';
import { createTestContext, type TestContext, waitFor } from './helpers/app.ts';
import { sessionHeaders, setupOwner, type TeamOwner } from './helpers/auth.ts';
import {
  buildApiKey,
  buildSmtpAdapter,
  buildTemplate,
  emailStatus,
  expectError,
  send,
  simpleDesign,
} from './helpers/factories.ts';
import { createTeamWithKey } from './helpers/sending-team.ts';
import { closedPort, startTestSmtpServer, type TestSmtpServer } from './helpers/smtp-server.ts';

async function logCount(ctx: TestContext, teamId: string): Promise<number> {
  const [row] = await ctx.app.ctx.database.db
    .select({ n: count() })
    .from(emailLogs)
    .where(eq(emailLogs.teamId, teamId));
  return row?.n ?? 0;
}

describe('send: refusals before anything is queued', () => {
  let ctx: TestContext;
  let owner: TeamOwner;
  let key: string;

  beforeAll(async () => {
    ctx = await createTestContext('postgres');
  });
  // Every case gets a team of its own (CONVENTIONS.md); the app and database are the file's.
  // Its adapter is never contacted: no worker runs in this describe.
  beforeEach(async () => {
    ({ owner, key } = await createTeamWithKey(ctx.app));
  });
  afterAll(() => ctx?.close());

  it('answers 400 VALIDATION_ERROR NO_ACTIVE_ADAPTER when the team has no active adapter', async () => {
    // A team without the adapter createTeamWithKey gives.
    const owner = await setupOwner(ctx.app);
    const key = (await buildApiKey(ctx.app, owner)).key;
    const template = await buildTemplate(ctx.app, owner, { name: 'No adapter yet' });
    const error = expectError(
      await send(ctx.app, key, { templateId: template.id, to: 'a@example.test' }),
      400,
      'VALIDATION_ERROR',
    );
    expect(error.details.reason).toBe('NO_ACTIVE_ADAPTER');
    const adapter = await buildSmtpAdapter(ctx.app, owner, await closedPort());
    await ctx.app.inject({
      method: 'PUT',
      url: `/api/adapters/${adapter.id}`,
      headers: sessionHeaders(ctx.app, owner),
      payload: { isActive: false },
    });
    const again = expectError(
      await send(ctx.app, key, { templateId: template.id, to: 'a@example.test' }),
      400,
      'VALIDATION_ERROR',
    );
    expect(again.details.reason).toBe('NO_ACTIVE_ADAPTER');
    await ctx.app.inject({
      method: 'PUT',
      url: `/api/adapters/${adapter.id}`,
      headers: sessionHeaders(ctx.app, owner),
      payload: { isActive: true },
    });
    expect(await logCount(ctx, owner.teamId)).toBe(0);
  });

  it('answers 400 INVALID_TEMPLATE for an unknown or inactive template', async () => {
    expectError(
      await send(ctx.app, key, { templateId: 'no-such-template', to: 'a@example.test' }),
      400,
      'INVALID_TEMPLATE',
    );
    const template = await buildTemplate(ctx.app, owner, { name: 'Soon inactive' });
    await ctx.app.inject({
      method: 'PUT',
      url: `/api/templates/${template.id}`,
      headers: sessionHeaders(ctx.app, owner),
      payload: { isActive: false },
    });
    expectError(
      await send(ctx.app, key, { templateId: template.id, to: 'a@example.test' }),
      400,
      'INVALID_TEMPLATE',
    );
  });

  it("does not send another team's template", async () => {
    const stranger = await setupOwner(ctx.app);
    const theirs = await buildTemplate(ctx.app, stranger, { name: 'Theirs' });
    expectError(
      await send(ctx.app, key, { templateId: theirs.id, to: 'a@example.test' }),
      400,
      'INVALID_TEMPLATE',
    );
  });

  it('validates recipients and variables', async () => {
    const template = await buildTemplate(ctx.app, owner, { name: 'Validation' });
    const bad = expectError(
      await send(ctx.app, key, { templateId: template.id, to: 'not-an-address' }),
      400,
      'VALIDATION_ERROR',
    );
    expect(bad.details.issues[0].path).toMatch(/^body\.to/);
    const tooMany = Array.from({ length: 51 }, (_, i) => `r${i}@example.test`);
    expectError(await send(ctx.app, key, { templateId: template.id, to: tooMany }), 400, 'VALIDATION_ERROR');
    expectError(await send(ctx.app, key, { templateId: template.id, to: [] }), 400, 'VALIDATION_ERROR');
    expectError(
      await send(ctx.app, key, { templateId: template.id, to: 'a@example.test', variables: 'x' }),
      400,
      'VALIDATION_ERROR',
    );
    expectError(await send(ctx.app, key, { to: 'a@example.test' }), 400, 'VALIDATION_ERROR');
  });

  it('answers 500 PDF_NOT_CONFIGURED when a PDF is asked for and no renderer is configured', async () => {
    const template = await buildTemplate(ctx.app, owner, { name: 'Invoice' });
    const before = await logCount(ctx, owner.teamId);
    const response = await send(ctx.app, key, {
      templateId: template.id,
      to: 'a@example.test',
      pdfAttachments: [{ templateId: template.id, filename: 'invoice.pdf' }],
    });
    expectError(response, 500, 'PDF_NOT_CONFIGURED');
    const withPdf = await buildTemplate(ctx.app, owner, { name: 'Always PDF', generatePdf: true });
    expectError(
      await send(ctx.app, key, { templateId: withPdf.id, to: 'a@example.test' }),
      500,
      'PDF_NOT_CONFIGURED',
    );
    expect(await logCount(ctx, owner.teamId)).toBe(before);
  });

  it('answers 400 NO_SENDER when neither the request nor the adapter names a sender', async () => {
    const team = await setupOwner(ctx.app);
    const teamKey = (await buildApiKey(ctx.app, team)).key;
    await buildSmtpAdapter(ctx.app, team, await closedPort(), { defaultFrom: undefined });
    const template = await buildTemplate(ctx.app, team, { name: 'No sender' });
    const error = expectError(
      await send(ctx.app, teamKey, { templateId: template.id, to: 'a@example.test' }),
      400,
      'VALIDATION_ERROR',
    );
    expect(error.details.reason).toBe('NO_SENDER');
    // A PDF the server cannot render is said after the request's own mistakes (session 14: the 500
    // PDF_NOT_CONFIGURED came first and hid the 400 the client can fix).
    const withPdf = await buildTemplate(ctx.app, team, { name: 'No sender, PDF', generatePdf: true });
    const first = expectError(
      await send(ctx.app, teamKey, { templateId: withPdf.id, to: 'a@example.test' }),
      400,
      'VALIDATION_ERROR',
    );
    expect(first.details.reason).toBe('NO_SENDER');
    const ok = await send(ctx.app, teamKey, {
      templateId: template.id,
      to: 'a@example.test',
      from: 'me@example.test',
    });
    expect(ok.statusCode, ok.body).toBe(202);
  });

  it('answers with the ids of the queued log and of its created email.send job', async () => {
    const template = await buildTemplate(ctx.app, owner, { name: 'Committed' });
    const response = await send(ctx.app, key, {
      templateId: template.id,
      to: 'a@example.test',
      variables: { first_name: 'Q' },
    });
    expect(response.statusCode, response.body).toBe(202);
    const { id, jobId } = response.json().data;
    const { TypeID } = await import('typeid-js');
    const job = await ctx.queue.boss.getJobById<{ emailId: string }>(
      EMAIL_SEND_JOB,
      TypeID.fromString(jobId).toUUID(),
    );
    expect(job?.data).toMatchObject({ emailId: id, teamId: owner.teamId });
    expect(job?.state).toBe('created');
    expect((await emailStatus(ctx.app, key, id)).status).toBe('queued');
  });

  it("answers 404 for another team's email status", async () => {
    const template = await buildTemplate(ctx.app, owner, { name: 'Private' });
    const { id } = (await send(ctx.app, key, { templateId: template.id, to: 'a@example.test' })).json().data;
    const stranger = await setupOwner(ctx.app);
    const strangerKey = (await buildApiKey(ctx.app, stranger)).key;
    const response = await ctx.app.inject({
      method: 'GET',
      url: `/api/v1/${id}/status`,
      headers: { 'x-api-key': strangerKey },
    });
    expectError(response, 404, 'NOT_FOUND');
    const log = await ctx.app.inject({
      method: 'GET',
      url: `/api/logs/${id}`,
      headers: sessionHeaders(ctx.app, stranger),
    });
    expectError(log, 404, 'NOT_FOUND');
  });

  it.each([
    ['/api/v1/send', 16],
    ['/api/v1/send/batch', 32],
  ])('answers a body over the limit of %s with that limit (%i MB) in the message', async (url, megabytes) => {
    const response = await ctx.app.inject({
      method: 'POST',
      url,
      headers: { 'x-api-key': key, 'content-type': 'application/json' },
      payload: JSON.stringify({ pad: 'x'.repeat(megabytes * 1024 * 1024) }),
    });
    const error = expectError(response, 400, 'INVALID_INPUT');
    expect(error.details.reason).toBe('BODY_TOO_LARGE');
    expect(response.json().error.message).toBe(`Request body exceeds the ${megabytes} MB limit`);
  });
});

describe('send: provider errors, retries and failure', () => {
  let ctx: TestContext;
  let smtp: TestSmtpServer;
  let owner: TeamOwner;
  let key: string;
  let templateId: string;
  const attemptsByRecipient = new Map<string, number>();

  beforeAll(async () => {
    ctx = await createTestContext('postgres', { SEND_RETRY_LIMIT: '2', SEND_RETRY_DELAY_SECONDS: '1' });
    smtp = await startTestSmtpServer({
      onRcptTo(address, _session, callback) {
        const n = (attemptsByRecipient.get(address.address) ?? 0) + 1;
        attemptsByRecipient.set(address.address, n);
        const [local] = address.address.split('@');
        if (local === 'always-busy' || (local === 'busy-twice' && n <= 2)) {
          const error = Object.assign(new Error('Mailbox busy, try later'), { responseCode: 451 });
          return callback(error);
        }
        if (local === 'unknown-user') {
          return callback(Object.assign(new Error('No such user'), { responseCode: 550 }));
        }
        callback();
      },
    });
    await ctx.startWorkers();
  });
  // Every case gets a team of its own (CONVENTIONS.md); the app, database and SMTP server are the file's.
  beforeEach(async () => {
    owner = await setupOwner(ctx.app);
    key = (await buildApiKey(ctx.app, owner)).key;
    await buildSmtpAdapter(ctx.app, owner, smtp.port);
    templateId = (await buildTemplate(ctx.app, owner, { name: 'Retry', designJson: simpleDesign('Hi') })).id;
  });
  afterAll(async () => {
    await ctx?.close();
    await smtp?.close();
  });

  const logOf = async (id: string) =>
    (
      await ctx.app.inject({ method: 'GET', url: `/api/logs/${id}`, headers: sessionHeaders(ctx.app, owner) })
    ).json().data;
  const settled = (id: string) =>
    waitFor(async () => {
      const log = await logOf(id);
      return ['sent', 'failed'].includes(log.status) ? log : undefined;
    }, 30_000);

  it('retries a transient 4xx with backoff and then sends', async () => {
    const { id } = (await send(ctx.app, key, { templateId, to: 'busy-twice@example.test' })).json().data;
    const log = await settled(id);
    expect(log.status).toBe('sent');
    expect(log.attemptCount).toBe(3);
    expect(attemptsByRecipient.get('busy-twice@example.test')).toBe(3);
    expect(log.errorMessage).toBeNull();
  });

  it('records failed with errorMessage once retries are exhausted', async () => {
    const { id } = (await send(ctx.app, key, { templateId, to: 'always-busy@example.test' })).json().data;
    const log = await settled(id);
    expect(log.status).toBe('failed');
    expect(log.attemptCount).toBe(3);
    expect(log.errorMessage).toContain('451');
    expect(log.failedAt).toEqual(expect.any(String));
    expect(log.events.map((e: { status: string }) => e.status)).toEqual(['queued', 'failed']);
  });

  it('fails at once on a permanent 5xx rejection', async () => {
    const { id } = (await send(ctx.app, key, { templateId, to: 'unknown-user@example.test' })).json().data;
    const log = await settled(id);
    expect(log.status).toBe('failed');
    expect(log.attemptCount).toBe(1);
    expect(attemptsByRecipient.get('unknown-user@example.test')).toBe(1);
    expect(log.errorMessage).toContain('550');
    expect((await emailStatus(ctx.app, key, id)).status).toBe('failed');
  });
});

describe('send: jobs that end without an outcome', () => {
  let ctx: TestContext;

  beforeAll(async () => {
    ctx = await createTestContext('postgres');
  });
  afterAll(() => ctx?.close());

  // The real path of a dead letter (a worker killed on an email's last attempt) is proven in
  // worker-crash.test.ts; here, the queue's declaration.
  it('declares email.send with a dead-letter queue, a heartbeat and an expiry past the send deadline', async () => {
    const queue = await ctx.queue.boss.getQueue(EMAIL_SEND_JOB);
    expect(queue).toMatchObject({ deadLetter: EMAIL_SEND_FAILED_JOB, heartbeatSeconds: 20 });
    expect(queue?.expireInSeconds).toBeGreaterThanOrEqual(5 * ctx.config.SEND_TIMEOUT_SECONDS);
  });

  it('sends an unreadable job straight to the dead-letter queue without retries', async () => {
    const payload = { nonsense: `unreadable-${Date.now()}` };
    const jobId = await ctx.queue.boss.send(EMAIL_SEND_JOB, payload);
    await ctx.startWorkers();
    const job = await waitFor(async () => {
      const found = await ctx.queue.boss.getJobById(EMAIL_SEND_JOB, jobId!);
      return found?.state === 'cancelled' ? found : undefined;
    });
    expect(job.retryCount).toBe(0);
    // Its payload went on to the dead-letter queue, whose handler cannot read it either.
    const dead = await waitFor(async () => {
      const [found] = await ctx.queue.boss.findJobs(EMAIL_SEND_FAILED_JOB, { data: payload });
      return found?.state === 'failed' ? found : undefined;
    });
    expect(dead.data).toEqual(payload);
  });
});
