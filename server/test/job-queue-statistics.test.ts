import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { STALE_BACKLOG_MIN_ROWS } from '../src/db/stale-statistics.ts';
import { BACKLOG_BATCH, JobQueue, PLANNED_JOB_COLUMNS } from '../src/jobs/queue.ts';
import { createTestDatabase } from './helpers/database.ts';

/**
 * JobQueue.refreshStatistics (issue #11 bench): with no statistics for the job table, the planner
 * expects a handful of waiting jobs and pg-boss's fetch reads and sorts the whole backlog each time;
 * the refresh analyzes the table once the backlog is big and the estimate ten times too small.
 */
describe('job queue statistics refresh', () => {
  let database: Awaited<ReturnType<typeof createTestDatabase>>;
  let queue: JobQueue;

  /** The planner's estimate of waiting jobs of `name` (what pg-boss's fetch is planned from). */
  const estimate = async (name: string): Promise<number> => {
    const { rows } = await database.handle.pool.query<{ 'QUERY PLAN': [{ Plan: { 'Plan Rows': number } }] }>(
      "explain (format json) select 1 from pgboss.job_common where name = $1 and state < 'active'",
      [name],
    );
    return rows[0]!['QUERY PLAN'][0].Plan['Plan Rows'];
  };

  beforeAll(async () => {
    database = await createTestDatabase();
    queue = new JobQueue(database.handle);
    await queue.start();
    // Only this test's refresh may analyze the table (autovacuum could otherwise beat it to it).
    await database.handle.pool.query('alter table pgboss.job_common set (autovacuum_enabled = false)');
    await queue.boss.createQueue('test.small');
    await queue.boss.createQueue('test.backlog');
    await queue.boss.createQueue('test.consumed');
  });
  afterAll(async () => {
    await queue?.stop(2_000);
    await database?.drop();
  });

  it('leaves a small backlog to autovacuum', async () => {
    await queue.boss.insert(
      'test.small',
      Array.from({ length: 50 }, (_, n) => ({ data: { n } })),
    );
    expect(await queue.refreshStatistics('test.small')).toBe(false);
  });

  it('analyzes once a backlog is big and misjudged, then not again within the check interval', async () => {
    const jobs = 2 * STALE_BACKLOG_MIN_ROWS;
    await queue.boss.insert(
      'test.backlog',
      Array.from({ length: jobs }, (_, n) => ({ data: { n } })),
    );
    expect(await estimate('test.backlog')).toBeLessThan(jobs / 10);
    expect(await queue.refreshStatistics('test.backlog')).toBe(true);
    expect(await estimate('test.backlog')).toBeGreaterThan(jobs / 2);
    // Checked less than a minute ago: no second look, whatever the table holds.
    expect(await queue.refreshStatistics('test.backlog')).toBe(false);
    // Only the columns the queue's plans read: not the payloads, most of a whole-table ANALYZE's
    // work (sampled, sorted and compared as jsonb).
    const { rows: analyzed } = await database.handle.pool.query<{ attname: string }>(
      "select attname from pg_stats where schemaname = 'pgboss' and tablename = 'job_common' order by attname",
    );
    expect(analyzed.map((row) => row.attname)).toEqual([...PLANNED_JOB_COLUMNS].sort());
    // Another process (its own JobQueue) checks, finds the estimate right and leaves it.
    const other = new JobQueue(database.handle);
    expect(await other.refreshStatistics('test.backlog')).toBe(false);
  });

  it('is refreshed by a claim loop that claims a big batch (email.send runs in one)', async () => {
    // Issue #9: without it, every fetch of the worker's backlog read and sorted all waiting jobs
    // (the larger half of the PostgreSQL CPU per delivered email).
    const jobs = 2 * STALE_BACKLOG_MIN_ROWS;
    await queue.boss.insert(
      'test.consumed',
      Array.from({ length: jobs }, (_, n) => ({ data: { n } })),
    );
    expect(await estimate('test.consumed')).toBeLessThan(jobs / 10);
    let release: () => void = () => {};
    const held = new Promise<undefined>((resolve) => {
      release = () => resolve(undefined);
    });
    let claimed = 0;
    await queue.consume<{ n: number }>(
      'test.consumed',
      { maxInFlight: BACKLOG_BATCH, batchSize: BACKLOG_BATCH, pollingIntervalMs: 50 },
      (batch) => {
        claimed += batch.length;
        return batch.map(() => held);
      },
    );
    try {
      const deadline = Date.now() + 10_000;
      while ((await estimate('test.consumed')) < jobs / 2 && Date.now() < deadline) {
        await new Promise((resolve) => setTimeout(resolve, 50));
      }
      expect(claimed).toBe(BACKLOG_BATCH);
      expect(await estimate('test.consumed')).toBeGreaterThan(jobs / 2);
    } finally {
      release();
    }
  });
});
