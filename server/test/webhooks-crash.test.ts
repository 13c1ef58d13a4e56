import { and, countDistinct, eq } from 'drizzle-orm';
import { PgBoss } from 'pg-boss';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { webhookDeliveries, webhookOutbox } from '../src/db/schema/index.ts';
import { createTestContext, type TestContext, waitFor } from './helpers/app.ts';
import { dashboardCall, dataOf, send } from './helpers/factories.ts';
import { type CliProcess, cliEnvOn, startCli } from './helpers/process.ts';
import { createTeamWithKey } from './helpers/sending-team.ts';
import { startTestSmtpServer, type TestSmtpServer } from './helpers/smtp-server.ts';
import { startWebhookReceiver, verifyWebhook, type WebhookReceiver } from './helpers/webhook-receiver.ts';

const EMAILS = 20;

describe('webhook deliveries pending when the worker is killed (-9) are delivered after a restart', () => {
  let ctx: TestContext;
  let smtp: TestSmtpServer;
  let receiver: WebhookReceiver;
  let supervisor: PgBoss;
  const processes: CliProcess[] = [];

  beforeAll(async () => {
    ctx = await createTestContext('postgres', { WEBHOOKS_ALLOW_PRIVATE: 'true' });
    smtp = await startTestSmtpServer();
    receiver = await startWebhookReceiver();
    // pg-boss maintenance every second: fails the killed worker's claimed email jobs once their
    // heartbeat lapses (what any process's next pass would do). Its webhook attempts need no
    // supervisor: their outbox rows' leases lapse (WEBHOOK_LEASE_SECONDS) and the new worker claims them.
    supervisor = new PgBoss({
      connectionString: ctx.app.ctx.database.connectionString,
      schema: 'pgboss',
      max: 2,
      superviseIntervalSeconds: 1,
      monitorIntervalSeconds: 1,
    });
    supervisor.on('error', () => {});
    await supervisor.start();
  });
  afterAll(async () => {
    await Promise.all(processes.map((p) => p.stop('SIGKILL')));
    await supervisor?.stop({ graceful: false, close: true });
    await ctx?.close();
    await smtp?.close();
    await receiver?.close();
  });

  const startWorker = async () => {
    const worker = startCli(
      ['start', '--role', 'worker'],
      cliEnvOn(ctx.app.ctx.database.connectionString, {
        // http receivers on 127.0.0.1: not production, private allowed.
        NODE_ENV: 'development',
        SMTP_ALLOW_PRIVATE: 'true',
        WEBHOOKS_ALLOW_PRIVATE: 'true',
        WEBHOOK_RETRY_SCHEDULE: '2,2,2,2,2,2',
      }),
    );
    processes.push(worker);
    await worker.waitForOutput(/Postwright worker started/);
    return worker;
  };

  const deliveredMessages = async (webhookId: string) => {
    const [row] = await ctx.app.ctx.database.db
      .select({ n: countDistinct(webhookDeliveries.messageId) })
      .from(webhookDeliveries)
      .where(and(eq(webhookDeliveries.webhookId, webhookId), eq(webhookDeliveries.success, true)));
    return row?.n ?? 0;
  };

  it('loses none: retries waiting and attempts in flight at the kill all reach the receiver', async () => {
    // A team of its own (CONVENTIONS.md); the app, database, SMTP sink and receiver are the file's.
    const { owner, key, templateId } = await createTeamWithKey(ctx.app, {
      smtpPort: smtp.port,
      template: { name: 'Crash' },
    });
    const hook = await dataOf(
      await dashboardCall(ctx.app, owner, 'POST', '/api/webhooks', {
        name: 'crash',
        url: receiver.url('/crash'),
        events: ['email.queued', 'email.sent'],
      }),
      201,
    );
    let up = false;
    // Down at first: email.queued attempts fail at once (their retries then wait in the queue),
    // email.sent attempts hang for 10 s (in flight at the kill).
    receiver.answer('/crash', (_nth, request) =>
      up ? { status: 200 } : { status: 500, delayMs: request.json?.event === 'email.sent' ? 10_000 : 0 },
    );
    for (let i = 0; i < EMAILS; i++) {
      const response = await send(ctx.app, key, { templateId, to: `crash-${i}@example.test` });
      expect(response.statusCode, response.body).toBe(202);
    }

    const first = await startWorker();
    // Kill once some failed attempts are recorded (their retries wait in the queue) while the
    // receiver holds others (in flight).
    const failedAttempts = async () => {
      const [row] = await ctx.app.ctx.database.db
        .select({ n: countDistinct(webhookDeliveries.id) })
        .from(webhookDeliveries)
        .where(eq(webhookDeliveries.webhookId, hook.id));
      return row?.n ?? 0;
    };
    const sentAttempts = () => receiver.to('/crash').filter((r) => r.json?.event === 'email.sent').length;
    await waitFor(
      async () => ((await failedAttempts()) >= EMAILS / 2 && sentAttempts() >= EMAILS / 2 ? true : undefined),
      60_000,
      'failed and hanging attempts',
    );
    await first.stop('SIGKILL');
    // The outbox at the kill: retries waiting (no lease) and attempts the dead worker holds (leased).
    const rows = await ctx.app.ctx.database.db
      .select()
      .from(webhookOutbox)
      .where(eq(webhookOutbox.webhookId, hook.id));
    const now = Date.now();
    const pending = rows.filter((row) => !row.leasedUntil || row.leasedUntil.getTime() <= now).length;
    const active = rows.length - pending;
    expect(pending).toBeGreaterThan(0);
    expect(active).toBeGreaterThan(0);
    expect(await deliveredMessages(hook.id)).toBe(0);

    up = true;
    await startWorker();
    // Every email's queued and sent events, once each at least.
    await waitFor(
      async () => ((await deliveredMessages(hook.id)) === 2 * EMAILS ? true : undefined),
      120_000,
      'every message delivered',
    );
    const received = receiver.to('/crash');
    const ids = new Set(received.map((r) => r.headers['webhook-id']));
    expect(ids.size).toBe(2 * EMAILS);
    for (const request of received) verifyWebhook(hook.secret, request);
    process.stderr.write(
      `[webhooks-crash] at the kill: ${pending} pending, ${active} in flight; ${received.length} requests for ${ids.size} messages\n`,
    );
  }, 240_000);
});
