import { type SQL, sql } from 'drizzle-orm';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { newId, newJobId } from '../src/ids.ts';
import { EMAIL_SEND_JOB } from '../src/jobs/definitions.ts';
import { JobNotInsertedError } from '../src/jobs/queue.ts';
import type { AcceptedEmailRows } from '../src/modules/emails/accept-batcher.ts';
import { createTestContext, type TestContext } from './helpers/app.ts';
import { setupOwner, type TeamOwner } from './helpers/auth.ts';
import { buildApiKey, buildSmtpAdapter, buildTemplate, expectError, send } from './helpers/factories.ts';
import { closedPort } from './helpers/smtp-server.ts';

/**
 * Issue #9 "Group-commit accept" on real PostgreSQL. Rows written by one transaction share its id
 * (the `xmin` system column), which is how these tests see which sends shared a transaction.
 */
describe('send: group commit (PostgreSQL)', () => {
  let ctx: TestContext;
  let owner: TeamOwner;
  let key: string;
  let adapterId: string;
  let template: { id: string; versionId: string };

  beforeAll(async () => {
    ctx = await createTestContext('postgres');
  });
  // Every case gets a team of its own (CONVENTIONS.md); the app and database are the file's.
  beforeEach(async () => {
    owner = await setupOwner(ctx.app);
    key = (await buildApiKey(ctx.app, owner, { rateLimit: 10_000 })).key;
    adapterId = (await buildSmtpAdapter(ctx.app, owner, await closedPort())).id;
    const { id } = await buildTemplate(ctx.app, owner, { name: 'Grouped' });
    const [current] = await query<{ version: string }>(
      sql`select current_version_id as version from templates where id = ${id}`,
    );
    template = { id, versionId: current!.version };
  });
  afterAll(() => ctx?.close());

  const db = () => ctx.app.ctx.database.db;
  /** The rows `statement` returns. */
  async function query<T>(statement: SQL): Promise<T[]> {
    return ((await db().execute(statement)) as unknown as { rows: T[] }).rows;
  }
  const batcher = () => ctx.context.acceptBatcher;

  /** Per email id: the transaction ids of its log, its events and its job (undefined when absent). */
  async function writtenBy(ids: string[]) {
    const logs = await query<{ id: string; xmin: string; job_id: string }>(
      sql`select id, xmin::text, job_id from email_logs where id in ${sql.raw(`(${ids.map((id) => `'${id}'`).join(',')})`)}`,
    );
    const result = new Map<string, { log: string; events: string[]; job?: string }>();
    for (const row of logs) {
      const events = await query<{ xmin: string }>(
        sql`select xmin::text from email_events where email_id = ${row.id}`,
      );
      const { TypeID } = await import('typeid-js');
      const jobs = await query<{ xmin: string }>(
        sql`select xmin::text from pgboss.job where name = ${EMAIL_SEND_JOB} and id = ${TypeID.fromString(row.job_id).toUUID()}::uuid`,
      );
      result.set(row.id, { log: row.xmin, events: events.map((e) => e.xmin), job: jobs[0]?.xmin });
    }
    return result;
  }

  it('writes concurrent sends in shared transactions, each log with its event and job, and answers each', async () => {
    const before = { ...batcher().stats };
    const responses = await Promise.all(
      Array.from({ length: 24 }, (_, i) =>
        send(ctx.app, key, { templateId: template.id, to: `r${i}@example.test`, variables: { n: i } }),
      ),
    );
    for (const response of responses) expect(response.statusCode, response.body).toBe(202);
    const ids = responses.map((r) => r.json().data.id as string);
    expect(new Set(ids).size).toBe(24);
    const written = await writtenBy(ids);
    expect(written.size).toBe(24);
    for (const rows of written.values()) {
      expect(rows.events).toEqual([rows.log]);
      expect(rows.job).toBe(rows.log);
    }
    const transactions = new Set([...written.values()].map((rows) => rows.log));
    expect(transactions.size).toBeLessThan(24);
    expect(batcher().stats.items - before.items).toBe(24);
    expect(batcher().stats.batches - before.batches).toBe(transactions.size);
  });

  it('fails only the send whose log the database refuses; the others of its batch commit together', async () => {
    // The send API refuses NUL itself (session 16), before the batcher: the item the database
    // refuses is submitted as acceptSend would submit it, in one batch with twelve good ones.
    const before = { ...batcher().stats };
    const items = Array.from({ length: 12 }, (_, i) => rowsFor(`ok${i}@example.test`));
    const bad = rowsFor('bad@example.test');
    bad.log.variables = { x: 'a\u0000b' };
    items.splice(6, 0, bad);
    const outcomes = await Promise.allSettled(items.map((item) => batcher().submit(item)));
    const refused = outcomes.splice(6, 1)[0]!;
    expect(refused.status).toBe('rejected');
    // PostgreSQL's "unsupported Unicode escape sequence" (22P05), through drizzle's error.
    expect(((refused as PromiseRejectedResult).reason as { cause?: { code?: string } }).cause?.code).toBe(
      '22P05',
    );
    expect(outcomes.map((o) => o.status)).toEqual(Array(12).fill('fulfilled'));
    const written = await writtenBy(items.filter((item) => item !== bad).map((item) => item.log.id));
    expect(written.size).toBe(12);
    for (const rows of written.values()) expect(rows.job).toBe(rows.log);
    const badLogs = await query(
      sql`select 1 from email_logs where team_id = ${owner.teamId} and 'bad@example.test' = any(to_addresses)`,
    );
    expect(badLogs).toHaveLength(0);
    // The bad item shared a batch: that batch was retried item by item (a savepoint each, so
    // those rows carry their subtransaction's id), and its good items committed.
    expect(batcher().stats.isolatedBatches - before.isolatedBatches).toBe(1);
    expect(batcher().stats.items - before.items).toBe(12);
  });

  /** Rows for the batcher, as acceptSend builds them. */
  function rowsFor(to: string, jobUuid = newJobId()): AcceptedEmailRows {
    const id = newId('emailLog');
    return {
      log: {
        id,
        teamId: owner.teamId,
        templateId: template.id,
        templateName: 'Grouped',
        templateVersionId: template.versionId,
        adapterId,
        apiKeyId: null,
        toAddresses: [to],
        fromAddress: 'sender@postwright.test',
        subject: 'Hi',
        variables: {},
        status: 'queued',
        jobId: jobUuid.jobId,
      },
      eventDetail: {},
      job: { id: jobUuid.uuid, data: { emailId: id, teamId: owner.teamId } },
    };
  }

  it('rolls back the log and first event of an item whose job insert fails, and commits the rest together', async () => {
    const taken = newJobId();
    await ctx.queue.boss.send(
      EMAIL_SEND_JOB,
      { emailId: 'eml_other', teamId: owner.teamId },
      { id: taken.uuid },
    );
    const items = [rowsFor('a@example.test'), rowsFor('b@example.test'), rowsFor('c@example.test', taken)];
    items.push(rowsFor('d@example.test'));
    const before = { ...batcher().stats };
    const outcomes = await Promise.allSettled(items.map((item) => batcher().submit(item)));
    expect(outcomes.map((o) => o.status)).toEqual(['fulfilled', 'fulfilled', 'rejected', 'fulfilled']);
    expect((outcomes[2] as PromiseRejectedResult).reason).toBeInstanceOf(JobNotInsertedError);

    const failedId = items[2]!.log.id;
    const leftovers = await query(
      sql`select (select count(*) from email_logs where id = ${failedId})::int as logs,
                 (select count(*) from email_events where email_id = ${failedId})::int as events`,
    );
    expect(leftovers[0]).toEqual({ logs: 0, events: 0 });
    const written = await writtenBy(items.filter((_, i) => i !== 2).map((item) => item.log.id));
    expect(written.size).toBe(3);
    for (const rows of written.values()) {
      expect(rows.events).toEqual([rows.log]);
      expect(rows.job).toBe(rows.log);
    }
    // One transaction for all four: first the batch (rolled back whole), then a savepoint per item.
    expect(batcher().stats.batches - before.batches).toBe(1);
    expect(batcher().stats.isolatedBatches - before.isolatedBatches).toBe(1);
    expect(batcher().stats.items - before.items).toBe(3);
  });

  it('answers INVALID_TEMPLATE, writing nothing, for a template deleted while it was cached', async () => {
    const doomed = await buildTemplate(ctx.app, owner, { name: 'Deleted elsewhere' });
    const first = await send(ctx.app, key, { templateId: doomed.id, to: 'a@example.test' });
    expect(first.statusCode, first.body).toBe(202);
    // Another process deletes it: this process's cache still holds it.
    await db().execute(sql`delete from templates where id = ${doomed.id}`);
    const count = async () =>
      (
        await query<{ n: number }>(
          sql`select count(*)::int as n from email_logs where template_name = 'Deleted elsewhere'`,
        )
      )[0]!.n;
    const logsBefore = await count();
    expectError(
      await send(ctx.app, key, { templateId: doomed.id, to: 'a@example.test' }),
      400,
      'INVALID_TEMPLATE',
    );
    expectError(
      await send(ctx.app, key, { templateId: doomed.id, to: 'a@example.test' }),
      400,
      'INVALID_TEMPLATE',
    );
    expect(await count()).toBe(logsBefore);
    // The log accepted before the delete still names its version, which outlived the template.
    const version = await query(
      sql`select v.id from email_logs l join template_versions v on v.id = l.template_version_id where l.id = ${first.json().data.id}`,
    );
    expect(version).toHaveLength(1);
  });
});
