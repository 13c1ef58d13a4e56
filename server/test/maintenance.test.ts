import { sql } from 'drizzle-orm';
import type pg from 'pg';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { type DatabaseHandle, openDatabase } from '../src/db/client.ts';
import { webhookDeliveries, webhooks } from '../src/db/schema/index.ts';
import { newId } from '../src/ids.ts';
import { bindJobHandlers } from '../src/job-handlers.ts';
import {
  MAINTENANCE_LOCK_KEY,
  MaintenanceLoop,
  type MaintenanceLoopDeps,
  type MaintenanceReport,
} from '../src/modules/maintenance/index.ts';
import { claimProviderEventToken } from '../src/modules/provider-events/provider-event-tokens.ts';
import { createTestContext, type TestContext, waitFor } from './helpers/app.ts';
import { signIn } from './helpers/auth.ts';
import { dashboardCall, dataOf } from './helpers/factories.ts';
import {
  ageEmailLog,
  cancelEmail,
  rowsOf,
  scheduledSend as scheduledSendOf,
  TestMaintenanceLoops,
} from './helpers/retention.ts';
import { createTeamWithKey, type SendingTeam } from './helpers/sending-team.ts';

/**
 * Review finding "growth": the workers' maintenance loop (modules/maintenance) deletes what grows
 * without bound: with LOG_RETENTION_DAYS, email logs (not `queued`) and webhook delivery records
 * older than that; always, expired idempotency keys, sessions expired over a day ago and provider
 * event tokens past their window. One run at a time across processes (an advisory lock), in
 * bounded batches. Real PostgreSQL; the loops are driven by `runOnce` (or short timers).
 */

let ctx: TestContext;
/** Every loop a test made, stopped after the file. */
const loops = new TestMaintenanceLoops(() => ctx.context.database);
const errors = loops.errors;

beforeAll(async () => {
  // No workers: a scheduled email stays `queued`, a cancelled one is `failed`.
  ctx = await createTestContext('postgres');
});
afterAll(async () => {
  await loops.stopAll();
  await ctx?.close();
});

/** A maintenance loop over the test database (`overrides` on the defaults), not started. */
const maintenanceLoop = (overrides?: Partial<MaintenanceLoopDeps>) => loops.create(overrides);
const rows = <T>(query: ReturnType<typeof sql>) => rowsOf<T>(ctx.context.db, query);

async function countOf(table: string, where: ReturnType<typeof sql>): Promise<number> {
  const [row] = await rows<{ n: number }>(
    sql`select count(*)::int as n from ${sql.raw(table)} where ${where}`,
  );
  return row!.n;
}

/** A scheduled send (it stays `queued`: no workers) with cc, metadata and an attachment; its id. */
const scheduledSend = (team: SendingTeam, idempotencyKey?: string) =>
  scheduledSendOf(ctx.app, team, {
    idempotencyKey,
    fields: { cc: ['carol@example.test'], metadata: { orderId: '42' } },
  });
const cancel = (team: SendingTeam, id: string) => cancelEmail(ctx.app, team, id);
const age = (emailId: string, days: number) => ageEmailLog(ctx.context.db, emailId, days);

/** The rows an email has in the log's tables (the log, history, recipients, options, attachments). */
async function footprint(emailId: string) {
  return {
    logs: await countOf('email_logs', sql`id = ${emailId}`),
    events: await countOf('email_events', sql`email_id = ${emailId}`),
    recipients: await countOf('email_recipients', sql`email_id = ${emailId}`),
    options: await countOf('email_send_options', sql`email_id = ${emailId}`),
    attachments: await countOf('email_attachments', sql`email_id = ${emailId}`),
  };
}

/** A webhook of the team (its URL is never called) with delivery records made `ages` days ago. */
async function webhookWithDeliveries(team: SendingTeam, ages: number[]): Promise<string[]> {
  const webhookId = newId('webhook');
  await ctx.context.db.insert(webhooks).values({
    id: webhookId,
    teamId: team.owner.teamId,
    name: 'Receiver',
    url: 'https://receiver.example/hook',
    events: ['email.sent'],
    secretEncrypted: 'v2:unused',
  });
  const ids: string[] = [];
  for (const days of ages) {
    const id = newId('webhookDelivery');
    ids.push(id);
    await ctx.context.db.insert(webhookDeliveries).values({
      id,
      teamId: team.owner.teamId,
      webhookId,
      messageId: `msg_${id}`,
      event: 'email.sent',
      payload: { type: 'email.sent' },
      createdAt: new Date(Date.now() - days * 24 * 3600_000),
    });
  }
  return ids;
}

/** A recipient outcome row for `emailId` (what a refused RCPT or a provider event writes). */
async function recipientOutcome(team: SendingTeam, emailId: string): Promise<void> {
  await ctx.context.db.execute(sql`insert into email_recipients (email_id, team_id, address, kind, status)
    values (${emailId}, ${team.owner.teamId}, 'carol@example.test', 'cc', 'failed')`);
}

describe('data retention (LOG_RETENTION_DAYS)', () => {
  it('deletes old email logs that are not queued, with their history, recipients, options and attachments, and old delivery records', async () => {
    const team = await createTeamWithKey(ctx.app);
    const old = await scheduledSend(team);
    const recent = await scheduledSend(team);
    const scheduled = await scheduledSend(team);
    await cancel(team, old);
    await cancel(team, recent);
    await recipientOutcome(team, old);
    await age(old, 31);
    await age(scheduled, 40);
    const [oldDelivery, recentDelivery] = await webhookWithDeliveries(team, [31, 29]);
    const before = await footprint(old);
    expect(before).toEqual({ logs: 1, events: 2, recipients: 1, options: 1, attachments: 1 });

    const report = await maintenanceLoop({ config: { LOG_RETENTION_DAYS: 30 } }).runOnce();

    expect(report?.finished).toBe(true);
    expect(report?.emailLogs).toBeGreaterThanOrEqual(1);
    expect(report?.webhookDeliveries).toBeGreaterThanOrEqual(1);
    expect(await footprint(old)).toEqual({ logs: 0, events: 0, recipients: 0, options: 0, attachments: 0 });
    const gone = await dashboardCall(ctx.app, team.owner, 'GET', `/api/logs/${old}`);
    expect(gone.statusCode).toBe(404);
    // Recent logs stay, and so does an old one still queued (its scheduled send reads it).
    expect((await footprint(recent)).attachments).toBe(1);
    expect(
      (await dataOf(await dashboardCall(ctx.app, team.owner, 'GET', `/api/logs/${scheduled}`))).status,
    ).toBe('queued');
    expect((await footprint(scheduled)).attachments).toBe(1);
    expect(await countOf('webhook_deliveries', sql`id = ${oldDelivery}`)).toBe(0);
    expect(await countOf('webhook_deliveries', sql`id = ${recentDelivery}`)).toBe(1);
  });

  it('keeps every log and delivery record when LOG_RETENTION_DAYS is unset', async () => {
    const team = await createTeamWithKey(ctx.app);
    const old = await scheduledSend(team);
    await cancel(team, old);
    await age(old, 3650);
    const [delivery] = await webhookWithDeliveries(team, [3650]);

    const report = await maintenanceLoop({ config: {} }).runOnce();

    expect(report).toMatchObject({ emailLogs: 0, webhookDeliveries: 0, finished: true });
    expect((await footprint(old)).logs).toBe(1);
    expect(await countOf('webhook_deliveries', sql`id = ${delivery}`)).toBe(1);
    // Clean up for the other cases, whose runs do delete old logs.
    await ctx.context.db.execute(sql`delete from email_logs where id = ${old}`);
    await ctx.context.db.execute(sql`delete from webhook_deliveries where id = ${delivery}`);
  });

  it('deletes a backlog in batches of `batchRows`, team by team, within one run', async () => {
    const team = await createTeamWithKey(ctx.app);
    const other = await createTeamWithKey(ctx.app);
    const ids: string[] = [];
    for (const owner of [team, team, team, team, team, other, other, other]) {
      const id = await scheduledSend(owner);
      await cancel(owner, id);
      await age(id, 10);
      ids.push(id);
    }
    await webhookWithDeliveries(team, [10, 10, 10, 10, 10]);

    const report = await maintenanceLoop({ config: { LOG_RETENTION_DAYS: 7 }, batchRows: 2 }).runOnce();

    expect(report?.finished).toBe(true);
    expect(report?.emailLogs).toBeGreaterThanOrEqual(8);
    expect(report?.webhookDeliveries).toBeGreaterThanOrEqual(5);
    expect(await countOf('email_logs', sql`id in ${ids}`)).toBe(0);
    expect(await countOf('webhook_deliveries', sql`team_id = ${team.owner.teamId}`)).toBe(0);
  });
});

describe('always-on sweeps', () => {
  it('deletes sessions expired over a day ago, and keeps the others', async () => {
    const team = await createTeamWithKey(ctx.app);
    await signIn(ctx.app, team.owner.email, team.owner.password);
    await signIn(ctx.app, team.owner.email, team.owner.password);
    const ids = (
      await rows<{ id: string }>(
        sql`select id from sessions where user_id = ${team.owner.userId} order by created_at`,
      )
    ).map((row) => row.id);
    expect(ids).toHaveLength(3);
    const [longExpired, justExpired] = ids as [string, string, string];
    await ctx.context.db.execute(
      sql`update sessions set expires_at = now() - interval '2 days' where id = ${longExpired}`,
    );
    await ctx.context.db.execute(
      sql`update sessions set expires_at = now() - interval '2 hours' where id = ${justExpired}`,
    );

    const report = await maintenanceLoop().runOnce();

    expect(report?.sessions).toBeGreaterThanOrEqual(1);
    const left = (
      await rows<{ id: string }>(sql`select id from sessions where user_id = ${team.owner.userId}`)
    ).map((row) => row.id);
    expect(left.sort()).toEqual(ids.slice(1).sort());
  });

  it('deletes provider event tokens past their retention (1 h), of any adapter, and keeps younger ones', async () => {
    const team = await createTeamWithKey(ctx.app);
    const { db } = ctx.context;
    for (const token of ['two-hours', 'half-hour', 'now'])
      expect(await claimProviderEventToken(db, team.adapterId, token, 10 * 60_000)).toBe(true);
    await db.execute(sql`update provider_event_tokens set seen_at = now() - interval '2 hours'
      where adapter_id = ${team.adapterId} and token = 'two-hours'`);
    await db.execute(sql`update provider_event_tokens set seen_at = now() - interval '30 minutes'
      where adapter_id = ${team.adapterId} and token = 'half-hour'`);

    const report = await maintenanceLoop().runOnce();

    expect(report?.providerEventTokens).toBeGreaterThanOrEqual(1);
    const left = await rows<{ token: string }>(
      sql`select token from provider_event_tokens where adapter_id = ${team.adapterId} order by token`,
    );
    expect(left.map((row) => row.token)).toEqual(['half-hour', 'now']);
  });

  it('deletes expired idempotency keys, and keeps live ones', async () => {
    const team = await createTeamWithKey(ctx.app);
    await scheduledSend(team, 'expired');
    await scheduledSend(team, 'live');
    await ctx.context.db.execute(sql`update idempotency_keys set expires_at = now() - interval '1 second'
      where team_id = ${team.owner.teamId} and key = 'expired'`);

    const report = await maintenanceLoop().runOnce();

    expect(report?.idempotencyKeys).toBeGreaterThanOrEqual(1);
    const left = await rows<{ key: string }>(
      sql`select key from idempotency_keys where team_id = ${team.owner.teamId}`,
    );
    expect(left.map((row) => row.key)).toEqual(['live']);
  });

  it('a keyed send leaves expired keys to the loop (it no longer sweeps on the request path)', async () => {
    const team = await createTeamWithKey(ctx.app);
    await scheduledSend(team, 'first');
    await ctx.context.db.execute(sql`update idempotency_keys set expires_at = now() - interval '1 second'
      where team_id = ${team.owner.teamId} and key = 'first'`);
    // The old code swept when Math.random() < 0.001; this draw would have swept.
    const random = vi.spyOn(Math, 'random').mockReturnValue(0);
    try {
      await scheduledSend(team, 'second');
    } finally {
      random.mockRestore();
    }
    const left = await rows<{ key: string }>(
      sql`select key from idempotency_keys where team_id = ${team.owner.teamId} order by key`,
    );
    expect(left.map((row) => row.key)).toEqual(['first', 'second']);
  });

  it('spends its time budget in bounded batches: a run ends after a batch once the budget is spent, the next goes on', async () => {
    const team = await createTeamWithKey(ctx.app);
    // Nothing expired is left from other cases.
    expect((await maintenanceLoop().runOnce())?.finished).toBe(true);
    for (let i = 0; i < 5; i++) await scheduledSend(team, `batch-${i}`);
    await ctx.context.db.execute(sql`update idempotency_keys set expires_at = now() - interval '1 second'
      where team_id = ${team.owner.teamId}`);
    const loop = maintenanceLoop({ budgetMs: 0, batchRows: 2 });

    const reports: MaintenanceReport[] = [];
    for (let i = 0; i < 3; i++) reports.push((await loop.runOnce())!);

    // A spent budget still lets a run make its first statement, and none after it.
    expect(reports.map((report) => [report.idempotencyKeys, report.finished])).toEqual([
      [2, false],
      [2, false],
      [1, false],
    ]);
    expect(await countOf('idempotency_keys', sql`team_id = ${team.owner.teamId}`)).toBe(0);
  });
});

describe('the loop', () => {
  /**
   * Holds `idempotency_keys` locked (ACCESS EXCLUSIVE) on a connection of its own, so that a run's
   * first delete waits, holding the maintenance lock, until `release()`.
   */
  async function blockFirstStatement(): Promise<{ release: () => Promise<void> }> {
    const client: pg.PoolClient = await ctx.context.database.pool.connect();
    await client.query('begin');
    await client.query('lock table idempotency_keys in access exclusive mode');
    return {
      release: async () => {
        await client.query('commit');
        client.release();
      },
    };
  }

  /** Waits until some session holds the maintenance advisory lock. */
  async function lockHeld(): Promise<void> {
    await waitFor(
      async () => {
        const [held] = await rows<{ n: number }>(sql`select count(*)::int as n from pg_locks
          where locktype = 'advisory' and granted and objid = ${MAINTENANCE_LOCK_KEY} and classid = 0`);
        return held!.n > 0 ? true : undefined;
      },
      20_000,
      'the maintenance lock',
    );
  }

  it('runs one run at a time across processes: a loop that does not get the lock skips its run', async () => {
    const elsewhere: DatabaseHandle = await openDatabase({
      databaseUrl: ctx.context.database.connectionString,
      poolSize: 2,
    });
    try {
      const here = maintenanceLoop();
      const there = maintenanceLoop({ database: elsewhere });
      const blocker = await blockFirstStatement();
      const running = here.runOnce();
      await lockHeld();

      expect(await there.runOnce()).toBeUndefined();
      expect(await here.runOnce()).toBeUndefined();

      await blocker.release();
      expect((await running)?.finished).toBe(true);
      // The lock is given back with the run.
      expect((await there.runOnce())?.finished).toBe(true);
    } finally {
      await elsewhere.close();
    }
  });

  it('stop waits for the statement in progress, then the run starts no other; no run after it', async () => {
    const loop = maintenanceLoop();
    const blocker = await blockFirstStatement();
    const running = loop.runOnce();
    await lockHeld();
    let stopped = false;
    const stopping = loop.stop(120_000).then(() => {
      stopped = true;
    });
    // The run is blocked in its first statement: stop cannot have returned.
    await new Promise((resolve) => setTimeout(resolve, 200));
    expect(stopped).toBe(false);

    await blocker.release();
    await stopping;
    const report = await running;
    expect(report).toMatchObject({ finished: false, sessions: 0, providerEventTokens: 0 });
    expect(await loop.runOnce()).toBeUndefined();
  });

  it('stop gives up waiting after its timeout (the pool cuts a stuck statement when it closes)', async () => {
    const loop = maintenanceLoop();
    const blocker = await blockFirstStatement();
    const running = loop.runOnce();
    await lockHeld();
    await loop.stop(50);
    await blocker.release();
    expect((await running)?.finished).toBe(false);
  });

  it('runs once after its first delay, then again every interval', async () => {
    const team = await createTeamWithKey(ctx.app);
    const expireSession = (id: string) =>
      ctx.context.db.execute(
        sql`update sessions set expires_at = now() - interval '2 days' where id = ${id}`,
      );
    const sessionIds = async () =>
      (await rows<{ id: string }>(sql`select id from sessions where user_id = ${team.owner.userId}`)).map(
        (row) => row.id,
      );
    await signIn(ctx.app, team.owner.email, team.owner.password);
    const [first, second] = (await sessionIds()) as [string, string];
    const logged: { details: object; message: string }[] = [];
    const loop = maintenanceLoop({
      firstRunAfterMs: 0,
      intervalMs: 100,
      logger: { info: (details, message) => logged.push({ details, message }), error: () => {} },
    });
    await expireSession(first);
    loop.start();
    await waitFor(
      async () => ((await sessionIds()).includes(first) ? undefined : true),
      20_000,
      'a first run',
    );
    await expireSession(second);
    await waitFor(async () => ((await sessionIds()).length === 0 ? true : undefined), 20_000, 'a second run');
    await loop.stop(5_000);
    expect(errors).toEqual([]);
    // What a run deleted is logged (info), per table.
    expect(logged[0]).toMatchObject({
      message: 'Maintenance deleted expired rows',
      details: { deleted: { sessions: 1 }, finished: true },
    });
  });

  it('is one of the worker loops (postwright start, roles all and worker)', async () => {
    const started = (bindJobHandlers(ctx.context).loops ?? []).map((start) => start());
    try {
      expect(started.filter((loop) => loop instanceof MaintenanceLoop)).toHaveLength(1);
    } finally {
      await Promise.all(started.map((loop) => loop.stop(1_000)));
    }
  });
});
