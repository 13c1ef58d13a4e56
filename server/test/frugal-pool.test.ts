import pg from 'pg';
import { afterEach, describe, expect, it } from 'vitest';
import { closeIdleConnections, frugalExecutor } from '../src/db/frugal-pool.ts';
import { TEST_DATABASE_URL } from './helpers/database.ts';

/**
 * Issue #9, idle memory: pg-boss's queries run through frugalExecutor, so pollers that fire
 * together share one connection (one PostgreSQL backend) and the pool grows only under load.
 * On real PostgreSQL; each case its own pool.
 */
const pools: pg.Pool[] = [];

/** A pool like pg-boss's (4 connections), closing a connection idle for `idleMs`; counts connects. */
function testPool(idleMs: number) {
  const pool = new pg.Pool({ connectionString: TEST_DATABASE_URL, max: 4, idleTimeoutMillis: idleMs });
  pools.push(pool);
  const counts = { opened: 0, peak: 0 };
  pool.on('connect', () => {
    counts.opened++;
    counts.peak = Math.max(counts.peak, pool.totalCount);
  });
  return { pool, counts };
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** Five pollers firing together every 50 ms, `rounds` times (what an idle worker's loops do). */
async function pollTogether(run: (text: string) => Promise<pg.QueryResult>, rounds: number) {
  const answers: number[] = [];
  for (let round = 0; round < rounds; round++) {
    const results = await Promise.all(Array.from({ length: 5 }, (_, i) => run(`select ${i}::int as n`)));
    answers.push(...results.map((result) => result.rows[0].n as number));
    await sleep(50);
  }
  return answers;
}

afterEach(async () => {
  await Promise.all(pools.splice(0).map((pool) => pool.end()));
});

describe('frugalExecutor', () => {
  it('runs pollers that fire together on one connection (a bare pool opens one per poller)', async () => {
    const frugal = testPool(5_000);
    const executor = frugalExecutor(frugal.pool, { growAfterMs: 1_000, shrinkAfterMs: 5_000 });
    const answers = await pollTogether((text) => executor.executeSql(text), 10);
    expect(answers).toEqual(Array.from({ length: 10 }, () => [0, 1, 2, 3, 4]).flat());
    expect(frugal.counts).toEqual({ opened: 1, peak: 1 });

    // The same pollers straight on a pool: what pg-boss's own pool did.
    const bare = testPool(5_000);
    await pollTogether((text) => bare.pool.query(text), 10);
    expect(bare.counts.peak).toBeGreaterThan(1);
  });

  it('opens more connections when queries wait, and goes back to one when the load ends', async () => {
    const { pool, counts } = testPool(300);
    const executor = frugalExecutor(pool, { growAfterMs: 200, shrinkAfterMs: 300 });
    // Load: four slow queries at a time, three times over; each waits for the others at first.
    for (let round = 0; round < 3; round++) {
      const results = await Promise.all(
        Array.from({ length: 4 }, (_, i) => executor.executeSql(`select pg_sleep(0.5), ${i}::int as n`)),
      );
      expect(results.map((result) => result.rows[0].n)).toEqual([0, 1, 2, 3]);
    }
    expect(counts.peak).toBeGreaterThan(1);
    expect(counts.peak).toBeLessThanOrEqual(4);
    // Idle pollers again: the limit drops back, the unused connections close.
    await expect
      .poll(
        async () => {
          await pollTogether((text) => executor.executeSql(text), 1);
          return pool.totalCount;
        },
        { timeout: 10_000, interval: 10 },
      )
      .toBe(1);
    // …and stays there: the pollers open no connection again.
    const opened = counts.opened;
    await pollTogether((text) => executor.executeSql(text), 10);
    expect(counts.opened).toBe(opened);
    expect(pool.totalCount).toBe(1);
  });

  it("passes a query's error on and keeps serving the next ones", async () => {
    const { pool } = testPool(5_000);
    const executor = frugalExecutor(pool, { growAfterMs: 1_000, shrinkAfterMs: 5_000 });
    const [failed, ok] = await Promise.allSettled([
      executor.executeSql('select * from no_such_table'),
      executor.executeSql('select $1::int as n', [7]),
    ]);
    expect(failed).toMatchObject({ status: 'rejected', reason: { code: '42P01' } });
    expect(ok).toMatchObject({ status: 'fulfilled', value: { rows: [{ n: 7 }] } });
    expect((await executor.executeSql('select 1 as n')).rows).toEqual([{ n: 1 }]);
    expect(pool.totalCount).toBe(1);
  });
});

describe('closeIdleConnections', () => {
  const backendPid = async (pool: pg.Pool) =>
    (await pool.query<{ pid: number }>('select pg_backend_pid() as pid')).rows[0]!.pid;

  it("closes the idle connections (their backends end) and leaves a busy one's query to finish", async () => {
    const { pool } = testPool(60_000);
    // Two connections, both idle afterwards.
    const clients = await Promise.all([pool.connect(), pool.connect()]);
    const idlePids = clients.map((client) => (client as unknown as { processID: number }).processID);
    for (const client of clients) client.release();
    const busy = pool.query<{ pid: number }>('select pg_backend_pid() as pid, pg_sleep(0.3)');
    // The busy query took one of the two idle connections (pg-pool hands it over asynchronously).
    await sleep(50);
    expect(pool.idleCount).toBe(1);

    expect(await closeIdleConnections(pool)).toBe(1);
    const busyPid = (await busy).rows[0]!.pid;
    expect(idlePids).toContain(busyPid);
    // The closed connection's backend is gone from the server; the busy one's stays (now idle).
    const observer = new pg.Client({ connectionString: TEST_DATABASE_URL });
    await observer.connect();
    try {
      const closedPid = idlePids.find((pid) => pid !== busyPid)!;
      await waitUntilGone(observer, closedPid);
      expect(pool.totalCount).toBe(1);
      // The next query runs on the connection that stayed, then on a fresh one once that closed too.
      expect(await backendPid(pool)).toBe(busyPid);
      expect(await closeIdleConnections(pool)).toBe(1);
      expect(idlePids).not.toContain(await backendPid(pool));
    } finally {
      await observer.end();
    }
  });
});

/** Waits (up to 5 s) until no server process has `pid` (a backend ends shortly after its client). */
async function waitUntilGone(observer: pg.Client, pid: number): Promise<void> {
  for (let tries = 0; tries < 50; tries++) {
    const { rowCount } = await observer.query('select 1 from pg_stat_activity where pid = $1', [pid]);
    if (rowCount === 0) return;
    await sleep(100);
  }
  throw new Error(`backend ${pid} still running`);
}
