import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { ClaimedJob } from '../src/jobs/queue.ts';
import { JobQueue } from '../src/jobs/queue.ts';
import { waitFor } from './helpers/app.ts';
import { createTestDatabase } from './helpers/database.ts';
import { recordPoolStatements } from './helpers/pool-statements.ts';

/**
 * The claim loop fetches pg-boss's metadata with each job: a handler tells its last attempt by the
 * job's own retry limit (`retryCount >= retryLimit`, e.g. email.send's fallback and failure).
 */
describe('claim loop job metadata', () => {
  let queue: JobQueue;
  let database: Awaited<ReturnType<typeof createTestDatabase>>;

  beforeAll(async () => {
    database = await createTestDatabase();
    queue = new JobQueue(database.handle);
    await queue.start();
    await queue.boss.createQueue('test.metadata', { retryLimit: 4 });
  });
  afterAll(async () => {
    await queue?.stop(2_000);
    await database?.drop();
  });

  it('gives each claimed job its own retry limit, read with the fetch', async () => {
    const name = 'test.metadata';
    const statements = recordPoolStatements(pg.Client.prototype);
    const claimed: ClaimedJob<{ n: number }>[] = [];
    try {
      // One job with the queue's retry limit, one enqueued with a limit of its own.
      await queue.boss.send(name, { n: 1 });
      await queue.boss.send(name, { n: 2 }, { retryLimit: 2 });
      await queue.consume<{ n: number }>(
        name,
        { maxInFlight: 5, batchSize: 5, pollingIntervalMs: 50 },
        (jobs) =>
          jobs.map(async (job) => {
            claimed.push(job);
            return undefined;
          }),
      );
      await waitFor(async () => (claimed.length >= 2 ? true : undefined), 10_000, `both ${name} jobs`);
    } finally {
      statements.stop();
    }
    const byN = new Map(claimed.map((job) => [job.data.n, job]));
    expect(byN.get(1)?.retryLimit).toBe(4);
    expect(byN.get(2)?.retryLimit).toBe(2);
    expect(byN.get(1)?.retryCount).toBe(0);
    const fetches = statements.texts.filter(
      (text) => text.includes(`name = '${name}'`) && /RETURNING/i.test(text),
    );
    expect(fetches.some((text) => /retry_limit as "retryLimit"/.test(text))).toBe(true);
  }, 20_000);
});
