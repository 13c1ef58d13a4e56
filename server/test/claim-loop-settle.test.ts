import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ClaimLoop, type JobSettler, SETTLED } from '../src/jobs/claim-loop.ts';
import type { JobQueue } from '../src/jobs/queue.ts';
import { waitFor } from './helpers/app.ts';
import { startTestJobQueue, type TestJobQueue } from './helpers/job-queue.ts';

/** A settler no test here should reach (its jobs are settled by the handler, SETTLED). */
const unusedSettler: JobSettler = {
  complete: () => Promise.reject(new Error('not expected')),
  fail: () => Promise.reject(new Error('not expected')),
  giveBack: () => Promise.reject(new Error('not expected')),
  completionSql: () => undefined,
};

/**
 * The claim loop frees every settled job's slot: jobs whose promises settle in the same turn are
 * all freed, however their settles interleave with the flush that writes them. (A settle that came
 * between a flush's last look at the queued settles and the end of that flush used to wait for the
 * next settle — for ever when none came, the job's slot lost.)
 */
describe('claim loop settles', () => {
  let jobQueue: TestJobQueue;
  let queue: JobQueue;
  const loops: ClaimLoop<unknown>[] = [];

  beforeAll(async () => {
    jobQueue = await startTestJobQueue(['test.settle']);
    ({ queue } = jobQueue);
  });
  afterAll(async () => {
    await Promise.all(loops.map((loop) => loop.stop(1_000)));
    await jobQueue?.close();
  });

  it('frees the slots of jobs that settle together', async () => {
    for (let i = 0; i < 2; i++) await queue.boss.send('test.settle', { i });
    let release!: () => void;
    const gate = new Promise<void>((resolve) => {
      release = resolve;
    });
    let claimed = 0;
    const loop = new ClaimLoop<unknown>(
      queue.boss,
      'test.settle',
      {
        maxInFlight: 10,
        batchSize: 10,
        pollingIntervalMs: 60_000,
        deadLetter: () => Promise.resolve(),
        settler: unusedSettler,
        onError: (error) => {
          throw error;
        },
      },
      (jobs) =>
        jobs.map(async () => {
          claimed++;
          await gate;
          return SETTLED;
        }),
    );
    loops.push(loop);
    loop.start();
    await waitFor(async () => (claimed === 2 ? true : undefined), 10_000, 'both jobs claimed');
    expect(loop.inFlight).toBe(2);

    release();
    await waitFor(async () => (loop.inFlight === 0 ? true : undefined), 2_000, 'both slots freed');
  }, 20_000);
});
