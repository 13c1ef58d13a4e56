import { eq, inArray, type SQL, sql } from 'drizzle-orm';
import { PgDialect } from 'drizzle-orm/pg-core';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { emailLogs } from '../src/db/schema/index.ts';
import {
  CACHED_VERSIONS_MAX_BYTES,
  needsSuppressionCheck,
  SendBatchLoader,
  type SendRef,
} from '../src/modules/emails/send-batch.ts';
import { addSuppression } from '../src/modules/suppressions/index.ts';
import { createTestContext, type TestContext, waitFor } from './helpers/app.ts';
import { sessionHeaders } from './helpers/auth.ts';
import { buildTemplate, send, simpleDesign } from './helpers/factories.ts';
import { queriesDuring, statementsDuring } from './helpers/pool-statements.ts';
import { createTeamWithKey } from './helpers/sending-team.ts';
import { startTestSmtpServer, type TestSmtpServer } from './helpers/smtp-server.ts';

/** `GET /api/logs/:id` as `owner`: the log's data. */
async function logAs(ctx: TestContext, owner: Parameters<typeof sessionHeaders>[1], id: string) {
  const response = await ctx.app.inject({
    method: 'GET',
    url: `/api/logs/${id}`,
    headers: sessionHeaders(ctx.app, owner),
  });
  return response.json().data;
}

/**
 * Issue #9 done-means: one batch in which some emails are refused permanently (5xx), some
 * transiently (4xx), and the rest accepted, each recorded by the rules.
 */
describe('a batch with permanent, transient and accepted recipients', () => {
  let ctx: TestContext;
  let smtp: TestSmtpServer;
  const rcptAttempts = new Map<string, number>();
  const KINDS = ['ok', 'perm', 'busy', 'once'] as const;
  const PER_KIND = 6;

  beforeAll(async () => {
    ctx = await createTestContext('postgres', {
      SEND_RETRY_LIMIT: '1',
      SEND_RETRY_DELAY_SECONDS: '1',
      // The team may have all 24 emails in flight: one fetch claims the whole batch.
      ADAPTER_MAX_CONNECTIONS: '16',
    });
    smtp = await startTestSmtpServer({
      onRcptTo(address, _session, callback) {
        const n = (rcptAttempts.get(address.address) ?? 0) + 1;
        rcptAttempts.set(address.address, n);
        const kind = address.address.split('-')[0];
        if (kind === 'perm') return callback(Object.assign(new Error('No such user'), { responseCode: 550 }));
        if (kind === 'busy' || (kind === 'once' && n === 1)) {
          return callback(Object.assign(new Error('Mailbox busy, try later'), { responseCode: 451 }));
        }
        callback();
      },
    });
  });
  afterAll(async () => {
    await ctx?.close();
    await smtp?.close();
  });

  // One case: the batch is the team's, accepted before the workers start so that one fetch claims it.
  it('records each email by the rules, writing the first round of outcomes in shared transactions', async () => {
    const { owner, key, templateId } = await createTeamWithKey(ctx.app, {
      smtpPort: smtp.port,
      template: { name: 'Batch' },
    });
    const ids = new Map<string, string>(); // recipient → email id
    for (const kind of KINDS) {
      for (let i = 0; i < PER_KIND; i++) {
        const to = `${kind}-${i}@example.test`;
        const response = await send(ctx.app, key, { templateId, to, variables: { first_name: to } });
        expect(response.statusCode, response.body).toBe(202);
        ids.set(to, response.json().data.id);
      }
    }
    await ctx.startWorkers();
    const logOf = (id: string) => logAs(ctx, owner, id);
    const recipients = (kind: string) => [...ids.keys()].filter((to) => to.startsWith(`${kind}-`));

    const logs = new Map<string, Awaited<ReturnType<typeof logOf>>>();
    for (const [to, id] of ids) {
      logs.set(
        to,
        await waitFor(
          async () => {
            const log = await logOf(id);
            return ['sent', 'failed'].includes(log.status) ? log : undefined;
          },
          60_000,
          `${to} to settle`,
        ),
      );
    }
    const delivered = (to: string) => smtp.messages.filter((m) => m.envelopeTo.includes(to)).length;
    for (const to of recipients('ok')) {
      expect(logs.get(to)).toMatchObject({ status: 'sent', attemptCount: 1, errorMessage: null });
      expect(logs.get(to).providerMessageId).toMatch(/^test-\d+$/); // the sink's "Queued as" id
      expect(logs.get(to).events.map((e: { status: string }) => e.status)).toEqual(['queued', 'sent']);
      expect(delivered(to)).toBe(1);
    }
    for (const to of recipients('perm')) {
      expect(logs.get(to)).toMatchObject({ status: 'failed', attemptCount: 1, failedAt: expect.any(String) });
      expect(logs.get(to).errorMessage).toContain('550');
      expect(logs.get(to).events.at(-1)).toMatchObject({ status: 'failed', detail: { permanent: true } });
      expect(rcptAttempts.get(to)).toBe(1);
    }
    for (const to of recipients('busy')) {
      expect(logs.get(to)).toMatchObject({ status: 'failed', attemptCount: 2 });
      expect(logs.get(to).errorMessage).toContain('451');
      expect(logs.get(to).events.map((e: { status: string }) => e.status)).toEqual(['queued', 'failed']);
      expect(rcptAttempts.get(to)).toBe(2);
      expect(delivered(to)).toBe(0);
    }
    for (const to of recipients('once')) {
      expect(logs.get(to)).toMatchObject({ status: 'sent', attemptCount: 2, errorMessage: null });
      expect(delivered(to)).toBe(1);
    }

    // Each job settled in the queue by its outcome, the first attempts all claimed by one fetch.
    const { TypeID } = await import('typeid-js');
    const jobs = new Map<string, { state: string; retryCount: number; startedOn: string; sameTx: boolean }>();
    for (const [to, id] of ids) {
      const [log] = await ctx.app.ctx.database.db
        .select({ jobId: emailLogs.jobId })
        .from(emailLogs)
        .where(eq(emailLogs.id, id));
      const uuid = TypeID.fromString(log!.jobId).toUUID();
      const rows = (
        (await ctx.app.ctx.database.db.execute(
          sql`select j.state::text, j.retry_count, j.started_on::text, j.xmin = l.xmin as same_tx
              from pgboss.job j, email_logs l where j.id = ${uuid}::uuid and l.id = ${id}`,
        )) as unknown as {
          rows: { state: string; retry_count: number; started_on: string; same_tx: boolean }[];
        }
      ).rows;
      jobs.set(to, {
        state: rows[0]!.state,
        retryCount: rows[0]!.retry_count,
        startedOn: rows[0]!.started_on,
        sameTx: rows[0]!.same_tx,
      });
    }
    // Accepted and refused for good on the first attempt: completed, never retried, and claimed by
    // one fetch (pg-boss stamps started_on with the fetching statement's time).
    const firstOnly = [...recipients('ok'), ...recipients('perm')].map((to) => jobs.get(to)!);
    expect(firstOnly.map((job) => [job.state, job.retryCount])).toEqual(
      firstOnly.map(() => ['completed', 0]),
    );
    expect(new Set(firstOnly.map((job) => job.startedOn)).size).toBe(1);
    // Each outcome and its job's completion committed together (one transaction: the same xmin).
    expect(firstOnly.map((job) => job.sameTx)).toEqual(firstOnly.map(() => true));
    // Refused for now: failed back to the queue once (a retry), then completed with their outcome
    // (sent on the retry, or failed on the last attempt): none went to the dead letter.
    for (const to of [...recipients('busy'), ...recipients('once')]) {
      expect(jobs.get(to)).toMatchObject({ state: 'completed', retryCount: 1 });
    }
    const dead = (
      (await ctx.app.ctx.database.db.execute(
        sql`select count(*)::int as n from pgboss.job where name = 'email.send.failed'`,
      )) as unknown as { rows: { n: number }[] }
    ).rows;
    expect(dead[0]!.n).toBe(0);

    // Rows updated by one transaction carry its id in xmin. The accepted and the permanently
    // refused emails were last written by their first (only) attempt.
    const firstRound = [...recipients('ok'), ...recipients('perm')].map((to) => ids.get(to)!);
    const rows = await ctx.app.ctx.database.db
      .select({ tx: sql<string>`xmin::text` })
      .from(emailLogs)
      .where(inArray(emailLogs.id, firstRound));
    const transactions = new Set(rows.map((row) => row.tx));
    expect(rows).toHaveLength(12);
    expect(transactions.size).toBeLessThanOrEqual(6);
  });
});

describe('a recipient suppressed while its email waits for a connection slot', () => {
  let ctx: TestContext;
  let smtp: TestSmtpServer;
  let firstRcpt: ((address: string) => void) | undefined;
  const firstSeen = new Promise<string>((resolve) => (firstRcpt = resolve));

  beforeAll(async () => {
    // One connection: the second email of the batch waits while the first one's send takes 2 s.
    ctx = await createTestContext('postgres', { ADAPTER_MAX_CONNECTIONS: '1' });
    let held = false;
    smtp = await startTestSmtpServer({
      onRcptTo(address, _session, callback) {
        if (held) return callback();
        held = true;
        firstRcpt?.(address.address);
        setTimeout(callback, 2_000);
      },
    });
  });
  afterAll(async () => {
    await ctx?.close();
    await smtp?.close();
  });

  it('is not sent the email: the worker looks again once the email held its slot (review finding, session 21)', async () => {
    // The batch's lookup found nothing; the suppression came while the email waited (a hard bounce
    // of an earlier email of the batch, an unsubscribe, a person).
    const { owner, key, templateId } = await createTeamWithKey(ctx.app, { smtpPort: smtp.port });
    const ids = new Map<string, string>();
    for (const to of ['first@example.test', 'second@example.test']) {
      const response = await send(ctx.app, key, { templateId, to });
      expect(response.statusCode, response.body).toBe(202);
      ids.set(to, response.json().data.id);
    }
    await ctx.startWorkers();
    const sentFirst = await firstSeen;
    const other = [...ids.keys()].find((to) => to !== sentFirst)!;
    await addSuppression(ctx.app.ctx.database.db, owner.teamId, { address: other, reason: 'unsubscribed' });
    const logOf = (id: string) => logAs(ctx, owner, id);
    const waited = await waitFor(async () => {
      const log = await logOf(ids.get(other)!);
      return log.status === 'queued' ? undefined : log;
    });
    expect(waited).toMatchObject({ status: 'failed', errorMessage: 'suppressed: unsubscribed' });
    expect((await logOf(ids.get(sentFirst)!)).status).toBe('sent');
    expect(smtp.messages.flatMap((message) => message.envelopeTo)).toEqual([sentFirst]);
  });
});

describe('the send batch loader', () => {
  let ctx: TestContext;

  // No workers in this file's app: the emails stay queued and nothing else uses the pool.
  beforeAll(async () => {
    ctx = await createTestContext('postgres');
  });
  afterAll(() => ctx?.close());

  it('loads a batch in four queries (logs, adapters, versions, suppressions), three once versions are cached', async () => {
    const database = ctx.app.ctx.database;
    const loader = new SendBatchLoader();
    const { owner, key, templateId } = await createTeamWithKey(ctx.app);
    for (let i = 0; i < 20; i++) {
      const response = await send(ctx.app, key, { templateId, to: `load-${i}@example.test` });
      expect(response.statusCode, response.body).toBe(202);
    }
    const refs = (
      await ctx.app.ctx.database.db.select().from(emailLogs).where(eq(emailLogs.teamId, owner.teamId))
    ).map((log) => ({ teamId: log.teamId, emailId: log.id }));
    expect(refs).toHaveLength(20);
    const countQueries = async (run: () => Promise<unknown>) =>
      (await statementsDuring(database.pool, run)).length;
    let prepared: Awaited<ReturnType<SendBatchLoader['load']>> = [];
    expect(await countQueries(async () => (prepared = await loader.load(database.db, refs)))).toBe(4);
    expect(prepared.map((item) => item.kind)).toEqual(refs.map(() => 'ready'));
    expect(await countQueries(() => loader.load(database.db, refs))).toBe(3);
  });

  it("finds the batch's suppressed recipients (to, cc, bcc) of each email's own team in one query", async () => {
    // Session 21: the lookup was made per email as each took a connection slot (about 40 % of the
    // worker's queries in bench:send); the batch's load now makes it once for every email.
    const database = ctx.app.ctx.database;
    const { owner, key, templateId } = await createTeamWithKey(ctx.app);
    const other = await createTeamWithKey(ctx.app);
    await addSuppression(database.db, owner.teamId, { address: 'gone@example.test', reason: 'hard bounce' });
    await addSuppression(database.db, owner.teamId, { address: 'cc-gone@example.test', reason: 'complaint' });
    await addSuppression(database.db, owner.teamId, { address: 'bcc-gone@example.test', reason: 'manual' });
    // Suppressed in the other team only: not this team's concern.
    await addSuppression(database.db, other.owner.teamId, { address: 'theirs@example.test', reason: 'x' });
    const bodies = [
      { to: 'fine@example.test' },
      { to: 'Gone Person <GONE@example.test>' },
      { to: 'fine@example.test', cc: ['cc-gone@example.test'] },
      { to: 'fine@example.test', bcc: ['ok@example.test', 'bcc-gone@example.test'] },
      { to: 'theirs@example.test' },
    ];
    const refs: SendRef[] = [];
    for (const body of bodies) {
      const response = await send(ctx.app, key, { templateId, ...body });
      expect(response.statusCode, response.body).toBe(202);
      const emailId = response.json().data.id;
      const { rows } = (await database.db.execute(
        sql`select data from pgboss.job where name = 'email.send' and data->>'emailId' = ${emailId}`,
      )) as unknown as { rows: { data: SendRef }[] };
      refs.push(rows[0]!.data);
    }
    let prepared: Awaited<ReturnType<SendBatchLoader['load']>> = [];
    const statements = await statementsDuring(database.pool, async () => {
      prepared = await new SendBatchLoader().load(database.db, refs);
    });
    expect(statements.filter((text) => text.includes('suppressions'))).toHaveLength(1);
    expect(
      prepared.map((item) =>
        item.kind === 'unsendable' ? item.message : item.kind === 'ready' ? 'sendable' : item.kind,
      ),
    ).toEqual([
      'sendable',
      'suppressed: hard bounce',
      'suppressed: complaint',
      'suppressed: manual',
      'sendable',
    ]);
  });

  it('loads the batch when its suppression lookup fails, leaving the check to each email (review finding, session 21)', async () => {
    // A failed lookup threw back every job of the batch with no attempt recorded; each email now
    // looks again once it holds its slot, where a failure is that email's own retry.
    const database = ctx.app.ctx.database;
    const { key, templateId, owner } = await createTeamWithKey(ctx.app);
    const response = await send(ctx.app, key, { templateId, to: 'lookup-fails@example.test' });
    expect(response.statusCode, response.body).toBe(202);
    const ref = { teamId: owner.teamId, emailId: response.json().data.id as string };
    const failingLookups = new Proxy(database.db, {
      get(target, property, receiver) {
        const value = Reflect.get(target, property, receiver);
        if (property !== 'execute') return typeof value === 'function' ? value.bind(target) : value;
        return (query: Parameters<typeof target.execute>[0]) =>
          new PgDialect().sqlToQuery(query as SQL).sql.includes('"suppressions"')
            ? Promise.reject(new Error('connection lost'))
            : target.execute(query);
      },
    });
    const [prepared] = await new SendBatchLoader().load(failingLookups, [ref]);
    expect(prepared?.kind).toBe('ready');
    expect(prepared?.kind === 'ready' && needsSuppressionCheck(prepared)).toBe(true);
    const [fresh] = await new SendBatchLoader().load(database.db, [ref]);
    expect(fresh?.kind === 'ready' && needsSuppressionCheck(fresh)).toBe(false);
  });

  it('keeps at most CACHED_VERSIONS_MAX_BYTES of template versions (review finding, session 13)', async () => {
    // A design of 90,000 values (the save's bound is 100,000) parses into about 6 MB: the versions
    // cache held 1,000 of them by count, and 2 MB designs (40 MB parsed) could exhaust the heap.
    const database = ctx.app.ctx.database;
    const heavy = simpleDesign('Hi {{ first_name }}');
    (heavy.b1!.data.props as Record<string, unknown>).junk = Array.from({ length: 90_000 }, () => ({}));
    const { owner, key } = await createTeamWithKey(ctx.app, { template: { designJson: heavy } });
    const refs: { teamId: string; emailId: string }[] = [];
    for (let i = 0; i < 12; i++) {
      const template = await buildTemplate(ctx.app, owner, { name: `heavy ${i}`, designJson: heavy });
      const response = await send(ctx.app, key, { templateId: template.id, to: `heavy-${i}@example.test` });
      expect(response.statusCode, response.body).toBe(202);
      refs.push({ teamId: owner.teamId, emailId: response.json().data.id });
    }
    const loader = new SendBatchLoader();
    const versionOf = async (ref: (typeof refs)[number]) => {
      const [prepared] = await loader.load(database.db, [ref]);
      if (prepared?.kind !== 'ready') throw new Error(`not ready: ${prepared?.kind}`);
      return prepared.version;
    };
    const first = await versionOf(refs[0]!);
    expect(await versionOf(refs[0]!)).toBe(first);
    for (const ref of refs.slice(1)) await versionOf(ref);
    expect(loader.cachedBytes).toBeLessThanOrEqual(CACHED_VERSIONS_MAX_BYTES);
    // By count alone (1,000) the first was still kept.
    const again = await versionOf(refs[0]!);
    expect(again).not.toBe(first);
    expect(again.id).toBe(first.id);
  });

  it("reads a batch's logs by primary key, whatever the statistics say of the team's size", async () => {
    // Issue #9: with statistics taken while a team had few logs (a burst newer than autovacuum's
    // last analyze), PostgreSQL planned the batch's log lookup as a BitmapAnd with the team's whole
    // range of email_logs_team_status_idx (11,848 index entries read per batch of ~14 in bench:send).
    const database = ctx.app.ctx.database;
    const { owner, key, templateId } = await createTeamWithKey(ctx.app);
    for (let i = 0; i < 20; i++) {
      const response = await send(ctx.app, key, { templateId, to: `pk-${i}@example.test` });
      expect(response.statusCode, response.body).toBe(202);
    }
    const logs = await database.db.select().from(emailLogs).where(eq(emailLogs.teamId, owner.teamId));
    const columns = (
      (await database.db.execute(sql`select column_name from information_schema.columns
        where table_name = 'email_logs' and column_name <> 'id' order by ordinal_position`)) as unknown as {
        rows: { column_name: string }[];
      }
    ).rows.map((row) => sql.identifier(row.column_name));
    const list = sql.join(columns, sql`, `);
    // The team's backlog grows with no analyze since (autovacuum is slower than a burst, or off).
    await database.db.execute(sql`insert into email_logs (id, ${list})
      select 'pk_filler_' || g, ${list} from email_logs, generate_series(1, 5000) g
      where email_logs.id = ${logs[0]!.id}`);
    // The lookup's text and values as sent (to EXPLAIN it as it ran).
    const sent = await queriesDuring(pg.Client.prototype, async () => {
      const prepared = await new SendBatchLoader().load(
        database.db,
        logs.map((log) => ({ teamId: log.teamId, emailId: log.id })),
      );
      expect(prepared.map((item) => item.kind)).toEqual(logs.map(() => 'ready'));
    });
    const lookup = sent.find((statement) => statement.text.includes('from "email_logs"'));
    expect(lookup).toBeDefined();
    const client = await database.pool.connect();
    try {
      const plan = await client.query({ text: `explain ${lookup!.text}`, values: lookup!.values });
      const lines = plan.rows.map((row: Record<string, string>) => row['QUERY PLAN']).join('\n');
      expect(lines).not.toMatch(/team_(status|created)_idx/);
    } finally {
      client.release();
    }
  });
});
