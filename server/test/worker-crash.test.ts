import type { AddressInfo } from 'node:net';
import { and, count, eq } from 'drizzle-orm';
import { PgBoss } from 'pg-boss';
import { SMTPServer, type SMTPServerOptions } from 'smtp-server';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { emailLogs } from '../src/db/schema/index.ts';
import { EMAIL_SEND_FAILED_JOB, EMAIL_SEND_JOB } from '../src/jobs/definitions.ts';
import { createTestContext, type TestContext, waitFor } from './helpers/app.ts';
import { sessionHeaders, setupOwner, type TeamOwner } from './helpers/auth.ts';
import { buildApiKey, buildSmtpAdapter, buildTemplate, send } from './helpers/factories.ts';
import { type CliProcess, cliEnvOn, startCli } from './helpers/process.ts';

/**
 * A real SMTP server that counts, per X-Postwright-Email-Id, the messages it accepted (no MIME
 * parsing: it must keep up with a worker draining thousands).
 */
async function startCountingSink(options: Partial<SMTPServerOptions> = {}) {
  const received = new Map<string, number>();
  const rcpts: string[] = [];
  let total = 0;
  const server = new SMTPServer({
    disabledCommands: ['STARTTLS', 'AUTH'],
    logger: false,
    onRcptTo(address, _session, callback) {
      rcpts.push(address.address);
      callback();
    },
    onData(stream, _session, callback) {
      const chunks: Buffer[] = [];
      stream.on('data', (chunk: Buffer) => chunks.push(chunk));
      stream.on('end', () => {
        const id =
          /^X-Postwright-Email-Id: (\S+)/im.exec(Buffer.concat(chunks).toString('latin1'))?.[1] ?? '?';
        received.set(id, (received.get(id) ?? 0) + 1);
        total += 1;
        callback();
      });
    },
    ...options,
  });
  server.on('error', () => {});
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    port: (server.server.address() as AddressInfo).port,
    received,
    rcpts,
    total: () => total,
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}

/**
 * pg-boss maintenance on the test database every second (the workers' own passes run every 60 s):
 * it fails jobs whose heartbeat lapsed — what a later pass of any process would do.
 */
async function startSupervisor(connectionString: string): Promise<PgBoss> {
  const boss = new PgBoss({
    connectionString,
    schema: 'pgboss',
    max: 2,
    superviseIntervalSeconds: 1,
    monitorIntervalSeconds: 1,
  });
  boss.on('error', () => {});
  await boss.start();
  return boss;
}

function workerEnv(ctx: TestContext, extra: Record<string, string> = {}): Record<string, string> {
  return cliEnvOn(ctx.app.ctx.database.connectionString, {
    SEND_RETRY_DELAY_SECONDS: '1',
    // The test SMTP server listens on 127.0.0.1.
    SMTP_ALLOW_PRIVATE: 'true',
    ...extra,
  });
}

async function startWorker(env: Record<string, string>, processes: CliProcess[]): Promise<CliProcess> {
  const worker = startCli(['start', '--role', 'worker'], env);
  processes.push(worker);
  await worker.waitForOutput(/Postwright worker started/);
  return worker;
}

describe('a worker killed (SIGKILL) while 2,000 emails drain', () => {
  const EMAILS = 2_000;
  let ctx: TestContext;
  let sink: Awaited<ReturnType<typeof startCountingSink>>;
  let supervisor: PgBoss;
  let owner: TeamOwner;
  const processes: CliProcess[] = [];
  const ids: string[] = [];

  beforeAll(async () => {
    ctx = await createTestContext('postgres', { SEND_RETRY_DELAY_SECONDS: '1' });
    sink = await startCountingSink();
    owner = await setupOwner(ctx.app);
    const key = (await buildApiKey(ctx.app, owner, { rateLimit: 10_000 })).key;
    await buildSmtpAdapter(ctx.app, owner, sink.port);
    const templateId = (await buildTemplate(ctx.app, owner, { name: 'Drain' })).id;
    const accept = async (i: number) => {
      const body = { templateId, to: `drain-${i}@example.test`, variables: { first_name: 'D' } };
      let response = await send(ctx.app, key, body);
      // The accept path's render budget is wall time (50 ms); a loaded machine can trip it.
      for (let retry = 0; retry < 3 && response.json().error?.details?.reason === 'LIMIT_EXCEEDED'; retry++) {
        response = await send(ctx.app, key, body);
      }
      expect(response.statusCode, response.body).toBe(202);
      ids.push(response.json().data.id);
    };
    // 50 requests at a time: the accept path commits concurrent sends together (group commit).
    for (let i = 0; i < EMAILS; i += 50) {
      await Promise.all(Array.from({ length: Math.min(50, EMAILS - i) }, (_, k) => accept(i + k)));
    }
    supervisor = await startSupervisor(workerEnv(ctx).DATABASE_URL!);
  }, 300_000);
  afterAll(async () => {
    await Promise.all(processes.map((p) => p.stop('SIGKILL')));
    await supervisor?.stop({ graceful: false, close: true });
    await ctx?.close();
    await sink?.close();
  });

  const sentCount = async () => {
    const [row] = await ctx.app.ctx.database.db
      .select({ n: count() })
      .from(emailLogs)
      .where(and(eq(emailLogs.teamId, owner.teamId), eq(emailLogs.status, 'sent')));
    return row?.n ?? 0;
  };

  it('sends every email after a restart, duplicating at most the emails in flight at the kill', async () => {
    const env = workerEnv(ctx);
    const first = await startWorker(env, processes);
    const started = Date.now();
    await waitFor(async () => (sink.total() >= 500 ? true : undefined), 120_000, '500 deliveries');
    await first.stop('SIGKILL');
    const killedAfterMs = Date.now() - started;
    const deliveredBeforeKill = sink.total();
    // What the killed worker held: claimed (active) and never settled.
    const inFlight = await ctx.queue.boss.findJobs(EMAIL_SEND_JOB, {});
    const activeAtKill = inFlight.filter((job) => job.state === 'active').length;
    expect(deliveredBeforeKill).toBeLessThan(EMAILS); // killed mid-drain

    await startWorker(env, processes);
    await waitFor(
      async () => ((await sentCount()) === EMAILS ? true : undefined),
      180_000,
      'every email sent',
    );

    const duplicates = [...sink.received.values()].reduce((sum, n) => sum + n - 1, 0);
    expect(ids.every((id) => (sink.received.get(id) ?? 0) >= 1)).toBe(true);
    expect(duplicates).toBeLessThanOrEqual(activeAtKill);
    process.stderr.write(
      `[worker-crash] ${deliveredBeforeKill} delivered in ${killedAfterMs} ms before the kill ` +
        `(${Math.round((deliveredBeforeKill * 1000) / killedAfterMs)}/s); ${activeAtKill} in flight; ` +
        `${duplicates} duplicates after the restart\n`,
    );
  }, 300_000);
});

describe('a worker killed on an email’s last attempt', () => {
  let ctx: TestContext;
  let blackHole: Awaited<ReturnType<typeof startCountingSink>>;
  let supervisor: PgBoss | undefined;
  let owner: TeamOwner;
  const processes: CliProcess[] = [];

  beforeAll(async () => {
    // No retries: the first attempt is the last.
    ctx = await createTestContext('postgres', { SEND_RETRY_LIMIT: '0' });
    // Accepts the connection, then never answers RCPT TO: the send hangs until the process dies.
    blackHole = await startCountingSink({
      onRcptTo(address) {
        blackHole.rcpts.push(address.address);
      },
    });
    owner = await setupOwner(ctx.app);
    await buildSmtpAdapter(ctx.app, owner, blackHole.port);
  });
  afterAll(async () => {
    await Promise.all(processes.map((p) => p.stop('SIGKILL')));
    await supervisor?.stop({ graceful: false, close: true });
    await ctx?.close();
    await blackHole?.close();
  });

  it('dead-letters the job once its heartbeat lapses, and the dead letter records failed', async () => {
    const key = (await buildApiKey(ctx.app, owner)).key;
    const templateId = (await buildTemplate(ctx.app, owner, { name: 'Last attempt' })).id;
    const response = await send(ctx.app, key, { templateId, to: 'lost@example.test' });
    expect(response.statusCode, response.body).toBe(202);
    const { id, jobId } = response.json().data;

    const worker = await startWorker(
      workerEnv(ctx, { SEND_RETRY_LIMIT: '0', SEND_TIMEOUT_SECONDS: '600' }),
      processes,
    );
    await waitFor(async () => (blackHole.rcpts.includes('lost@example.test') ? true : undefined), 30_000);
    await worker.stop('SIGKILL');

    // Nothing but the real path from here: pg-boss fails the job when its heartbeat lapses, routes
    // it to email.send.failed, and this process's dead-letter worker records the outcome.
    supervisor = await startSupervisor(workerEnv(ctx).DATABASE_URL!);
    await ctx.startWorkers();
    const log = await waitFor(
      async () => {
        const data = (
          await ctx.app.inject({
            method: 'GET',
            url: `/api/logs/${id}`,
            headers: sessionHeaders(ctx.app, owner),
          })
        ).json().data;
        return data.status === 'failed' ? data : undefined;
      },
      90_000,
      'the dead letter to record failed',
    );
    expect(log.errorMessage).toContain('Delivery did not complete');
    expect(log.attemptCount).toBe(0); // the one attempt never reported back
    expect(log.events.at(-1)).toMatchObject({ status: 'failed', detail: { deadLetter: true } });
    const { TypeID } = await import('typeid-js');
    const job = await ctx.queue.boss.getJobById(EMAIL_SEND_JOB, TypeID.fromString(jobId).toUUID());
    expect(job?.state).toBe('failed');
    const [dead] = await ctx.queue.boss.findJobs(EMAIL_SEND_FAILED_JOB, { data: { emailId: id } });
    expect(dead?.state).toBe('completed');
  }, 120_000);
});
