import { createServer } from 'node:http';
import { connect } from 'node:net';
import { eq, inArray } from 'drizzle-orm';
import { SMTPServer } from 'smtp-server';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { emailLogs, webhookDeliveries, webhookOutbox } from '../src/db/schema/index.ts';
import { declareQueues } from '../src/jobs/registry.ts';
import { closeWithin, SHUTDOWN_GRACE_MS } from '../src/runtime.ts';
import { createTestContext, type TestContext, waitFor } from './helpers/app.ts';
import { dashboardCall, dataOf, send } from './helpers/factories.ts';
import { cliEnvOn, startCli } from './helpers/process.ts';
import { createTeamWithKey } from './helpers/sending-team.ts';
import { startWebhookReceiver } from './helpers/webhook-receiver.ts';

/**
 * A SIGTERM'd server stops in bounded time whatever its clients do (review finding, session 15:
 * one connection holding a request open, its body announced but never sent, kept `postwright
 * start` running after SIGTERM until the client let go, its workers still claiming jobs).
 */
describe('graceful shutdown', () => {
  let ctx: TestContext;
  beforeAll(async () => {
    // The webhook receiver of the worker case listens on 127.0.0.1.
    // Jobs queued here get no retry (SEND_RETRY_LIMIT is the queuing process's): every attempt of
    // the worker case's emails is their last.
    ctx = await createTestContext('postgres', { WEBHOOKS_ALLOW_PRIVATE: 'true', SEND_RETRY_LIMIT: '0' });
  });
  afterAll(() => ctx?.close());

  it('stops within its grace period while a client holds a request open', async () => {
    const cli = startCli(
      ['start', '--role', 'api'],
      cliEnvOn(ctx.app.ctx.database.connectionString, {
        PORT: '0',
        HOST: '127.0.0.1',
        BASE_URL: 'http://127.0.0.1:3999',
      }),
    );
    try {
      const url = new URL((await cli.waitForOutput(/listening on (http:\/\/[^\s]+)/))[1]!);
      const socket = connect(Number(url.port), url.hostname);
      socket.on('error', () => {});
      await new Promise<void>((resolve) => socket.once('connect', resolve));
      socket.write(
        'POST /api/auth/sign-in/email HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n{',
      );
      // Trickle a byte now and then, as a client keeping the request alive would.
      const trickle = setInterval(() => socket.write(' '), 1_000);
      await new Promise((resolve) => setTimeout(resolve, 500));
      const started = Date.now();
      const code = await Promise.race([
        cli.stop('SIGTERM'),
        new Promise<'hung'>((resolve) => setTimeout(() => resolve('hung'), SHUTDOWN_GRACE_MS + 15_000)),
      ]);
      clearInterval(trickle);
      socket.destroy();
      expect(code).toBe(0);
      expect(Date.now() - started).toBeLessThan(SHUTDOWN_GRACE_MS + 10_000);
      // The stop is told in the log (review finding, session 19: a stop left no trace).
      expect(cli.output()).toMatch(
        /Stopping \(SIGTERM\): finishing the work in progress\.\n[\s\S]*Stopped\./,
      );
    } finally {
      cli.child.kill('SIGKILL');
    }
  }, 60_000);

  it('lets sends and webhook requests in progress finish on SIGTERM; an email waiting for a connection goes back unsent', async () => {
    // Review finding, session 18: a stopping worker waited 10 s, then cut the sends in progress
    // (recorded failed "may have been delivered", never retried) and left its webhook requests
    // unrecorded (sent again after a restart). Both answer after 12 s here, well within their
    // deadlines (SEND_TIMEOUT_SECONDS 60, WEBHOOK_TIMEOUT_SECONDS 30).
    const ANSWER_AFTER_MS = 12_000;
    const delivered: string[][] = [];
    const smtp = new SMTPServer({
      disabledCommands: ['STARTTLS', 'AUTH'],
      logger: false,
      onData(stream, session, callback) {
        stream.resume();
        stream.on('end', () => {
          delivered.push(session.envelope.rcptTo.map((rcpt) => rcpt.address));
          setTimeout(() => callback(null, `Queued as slow-${delivered.length}`), ANSWER_AFTER_MS);
        });
      },
    });
    smtp.on('error', () => {});
    await new Promise<void>((resolve) => smtp.listen(0, '127.0.0.1', resolve));
    const smtpPort = (smtp.server.address() as { port: number }).port;
    const receiver = await startWebhookReceiver();
    receiver.answer('/slow', () => ({ delayMs: ANSWER_AFTER_MS }));
    // The queues' retry policy as this file's context declares it (another case's CLI declared
    // its own defaults on the same database).
    await declareQueues(ctx.queue, ctx.config);
    const team = await createTeamWithKey(ctx.app, { smtpPort });
    const webhook = await dataOf(
      await dashboardCall(ctx.app, team.owner, 'POST', '/api/webhooks', {
        name: 'Slow',
        url: receiver.url('/slow'),
        events: ['email.queued'],
      }),
      201,
    );
    // Queued before the worker starts: the worker takes both, sends one (one connection) and
    // keeps the other waiting for it; both email.queued deliveries are requested at once.
    const ids: string[] = [];
    for (const to of ['first@example.test', 'second@example.test']) {
      const response = await send(ctx.app, team.key, { templateId: team.templateId, to });
      expect(response.statusCode, response.body).toBe(202);
      ids.push(response.json().data.id);
    }
    const cli = startCli(
      ['start', '--role', 'worker'],
      cliEnvOn(ctx.app.ctx.database.connectionString, {
        ADAPTER_MAX_CONNECTIONS: '1',
        SMTP_ALLOW_PRIVATE: 'true',
        WEBHOOKS_ALLOW_PRIVATE: 'true',
        // Not production, which takes only https webhook URLs: the receiver is plain http.
        NODE_ENV: 'test',
      }),
    );
    try {
      await cli.waitForOutput(/worker started/);
      await waitFor(
        async () => (delivered.length === 1 && receiver.to('/slow').length === 2 ? true : undefined),
        20_000,
        'one send and two webhook requests in progress',
      );
      const started = Date.now();
      expect(await cli.stop('SIGTERM')).toBe(0);
      expect(Date.now() - started).toBeGreaterThanOrEqual(ANSWER_AFTER_MS - 2_000);
    } finally {
      cli.child.kill('SIGKILL');
      await new Promise<void>((resolve) => smtp.close(() => resolve()));
      await receiver.close();
    }
    const db = ctx.app.ctx.database.db;
    const logs = await db.select().from(emailLogs).where(inArray(emailLogs.id, ids));
    const statusOf = (id: string) => logs.find((log) => log.id === id);
    // The send in progress finished and was recorded; the waiting one went back unsent.
    expect(statusOf(ids[0]!)).toMatchObject({ status: 'sent', providerMessageId: expect.any(String) });
    expect(statusOf(ids[1]!)).toMatchObject({ status: 'queued', attemptCount: 0 });
    // Its job waits for a retry without the attempt counted (review finding, session 18: on its
    // last attempt it was failed).
    const { rows: jobs } = await ctx.app.ctx.database.pool.query(
      `select state, retry_count, retry_limit from pgboss.job where name = 'email.send' and data->>'emailId' = $1`,
      [ids[1]],
    );
    expect(jobs).toEqual([{ state: 'retry', retry_count: 0, retry_limit: 1 }]);
    expect(delivered).toEqual([['first@example.test']]);
    // Both webhook requests were recorded as delivered; nothing is left to send again.
    const records = await db
      .select()
      .from(webhookDeliveries)
      .where(eq(webhookDeliveries.webhookId, webhook.id));
    expect(records.map((record) => record.success)).toEqual([true, true]);
    expect(await db.select().from(webhookOutbox).where(eq(webhookOutbox.webhookId, webhook.id))).toEqual([]);
  }, 90_000);

  it('accepts no send whose connection the grace period cut (the client saw it drop)', async () => {
    // Review finding, session 18: a send rendering a slow PDF at the end of the grace had its
    // connection closed, then committed its email anyway; a client retrying sent it twice.
    const renderer = createServer((_request, response) => {
      setTimeout(
        () => response.writeHead(200, { 'content-type': 'application/pdf' }).end('%PDF-1.4 fake'),
        1_500,
      );
    });
    await new Promise<void>((resolve) => renderer.listen(0, '127.0.0.1', resolve));
    const own = await createTestContext('postgres', {
      PDF_RENDERER_URL: `http://127.0.0.1:${(renderer.address() as { port: number }).port}`,
    });
    try {
      const team = await createTeamWithKey(own.app);
      const url = await own.app.listen({ port: 0, host: '127.0.0.1' });
      const answer = fetch(`${url}/api/v1/send`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', 'x-api-key': team.key },
        body: JSON.stringify({
          templateId: team.templateId,
          to: 'cut@example.test',
          pdfAttachments: [{ templateId: team.templateId, filename: 'doc.pdf' }],
        }),
      }).then(
        (response) => response.status,
        () => 'dropped' as const,
      );
      await new Promise((resolve) => setTimeout(resolve, 300));
      await closeWithin(own.app, 200);
      expect(await answer).toBe('dropped');
      // The handler went on once the renderer answered; its email was refused, not committed.
      await new Promise((resolve) => setTimeout(resolve, 2_500));
      const logs = await own.context.database.db
        .select()
        .from(emailLogs)
        .where(eq(emailLogs.teamId, team.owner.teamId));
      expect(logs).toEqual([]);
    } finally {
      await own.close();
      await new Promise<void>((resolve) => renderer.close(() => resolve()));
    }
  });
});
