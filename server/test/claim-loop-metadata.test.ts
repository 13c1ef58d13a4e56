import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { ClaimedJob } from '../src/jobs/queue.ts';
import { JobQueue } from '../src/jobs/queue.ts';
import { waitFor } from './helpers/app.ts';
import { createTestDatabase } from './helpers/database.ts';
import { recordPoolStatements } from './helpers/pool-statements.ts';

/**
 * The claim loop's `retryLimit` option (webhook.deliver, issue #11 bench): jobs are fetched without
 * pg-boss's metadata (a quarter of the columns to read and parse per job) and each gets the
 * queue's retry limit; without the option, the loop reads each job's own.
 */
describe('claim loop fetch without metadata', () => {
  let queue: JobQueue;
  let database: Awaited<ReturnType<typeof createTestDatabase>>;

  beforeAll(async () => {
    database = await createTestDatabase();
    queue = new JobQueue(database.handle);
    await queue.start();
    await queue.boss.createQueue('test.lean', { retryLimit: 3 });
    await queue.boss.createQueue('test.full', { retryLimit: 4 });
  });
  afterAll(async () => {
    await queue?.stop(2_000);
    await database?.drop();
  });

  /** Consumes `name` until one job arrives; returns it and the fetch statements sent meanwhile. */
  const claimOne = async (name: string, retryLimit?: number) => {
    const statements = recordPoolStatements(pg.Client.prototype);
    const claimed: ClaimedJob<{ n: number }>[] = [];
    try {
      await queue.boss.send(name, { n: 1 });
      await queue.consume<{ n: number }>(
        name,
        { maxInFlight: 5, batchSize: 5, pollingIntervalMs: 50, ...(retryLimit ? { retryLimit } : {}) },
        (jobs) =>
          jobs.map(async (job) => {
            claimed.push(job);
            return undefined;
          }),
      );
      await waitFor(async () => (claimed.length > 0 ? true : undefined), 10_000, `a ${name} job`);
    } finally {
      statements.stop();
    }
    const fetches = statements.texts.filter(
      (text) => text.includes(`name = '${name}'`) && /RETURNING/i.test(text),
    );
    return { job: claimed[0]!, fetches };
  };

  it('fetches only id, data and retry count, and gives each job the queue retry limit it was told', async () => {
    const { job, fetches } = await claimOne('test.lean', 3);
    expect(job.data).toEqual({ n: 1 });
    expect(job.retryCount).toBe(0);
    expect(job.retryLimit).toBe(3);
    expect(fetches.length).toBeGreaterThan(0);
    for (const text of fetches) expect(text).not.toMatch(/retry_limit as "retryLimit"/);
  }, 20_000);

  it('without it, fetches the metadata and reads each job its own retry limit', async () => {
    const { job, fetches } = await claimOne('test.full');
    expect(job.retryLimit).toBe(4);
    expect(fetches.some((text) => /retry_limit as "retryLimit"/.test(text))).toBe(true);
  }, 20_000);
});
