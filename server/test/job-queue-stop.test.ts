import { setTimeout as sleep } from 'node:timers/promises';
import { afterAll, describe, expect, it } from 'vitest';
import { startTestJobQueue, type TestJobQueue } from './helpers/job-queue.ts';

/**
 * JobQueue.stop (review finding, session 19): pg-boss's workers (invitations, thumbnails, …) stop
 * fetching when the stop begins, not after the claim loops have drained; before, they went on taking
 * new jobs while the loops drained and then waited for them with a full timeout of their own.
 */
describe('job queue stop', () => {
  let testQueue: TestJobQueue | undefined;
  afterAll(async () => {
    await testQueue?.close();
  });

  it("takes pg-boss's workers off at once: a job queued while the loops drain is left for the next start", async () => {
    testQueue = await startTestJobQueue(['test.stop-slow']);
    const { queue, database } = testQueue;
    const started: string[] = [];
    await queue.work<{ n: number }>(
      'test.stop-slow',
      { batchSize: 1, pollingIntervalSeconds: 0.5 },
      async (job) => {
        started.push(job.id);
        await sleep(500);
      },
    );
    // A loop that takes 3 s to drain, e.g. the send claim loop finishing its sends.
    queue.attach({ stop: () => sleep(3_000) });

    const stopping = queue.stop(10_000);
    await sleep(200);
    const id = await queue.boss.send('test.stop-slow', { n: 1 });
    await stopping;

    expect(started).toEqual([]);
    const { rows } = await database.handle.pool.query<{ state: string }>(
      'select state from pgboss.job where id = $1',
      [id],
    );
    expect(rows[0]?.state).toBe('created');
  }, 30_000);
});
