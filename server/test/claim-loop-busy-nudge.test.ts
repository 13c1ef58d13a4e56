import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { newId, newJobId } from '../src/ids.ts';
import { type JobPayload, WEBHOOK_DELIVER_JOB } from '../src/jobs/definitions.ts';
import type { JobQueue, SETTLED } from '../src/jobs/queue.ts';
import { waitFor } from './helpers/app.ts';
import { startTestJobQueue, type TestJobQueue } from './helpers/job-queue.ts';

/**
 * A busy claim loop (one that found jobs within BUSY_WINDOW_MS) picks up a job this process
 * enqueues without napping out its busy polling interval. Settles used to be what woke a busy
 * loop; jobs handed over in their place (JobQueue.adopt) free no slot, so the jobs enqueued
 * meanwhile waited the whole interval (issue #11 bench: p99 delay 50 ms instead of 20).
 */
describe('claim loop nudged while busy', () => {
  let jobQueue: TestJobQueue;
  let database: TestJobQueue['database'];
  let queue: JobQueue;

  beforeAll(async () => {
    jobQueue = await startTestJobQueue();
    ({ database, queue } = jobQueue);
  });
  afterAll(async () => {
    await jobQueue?.close();
  });

  const enqueue = (messageId: string) =>
    database.handle.db.transaction((tx) =>
      queue.enqueueMany(tx, WEBHOOK_DELIVER_JOB, [
        {
          id: newJobId().uuid,
          data: {
            webhookId: 'whk_busy',
            teamId: 'team_busy',
            messageId,
            event: 'email.sent',
            payload: {},
            attempt: 1,
          },
        },
      ]),
    );

  it('fetches a job enqueued here soon, not after the busy interval', async () => {
    const seen: string[] = [];
    // Busy polling every 10 s: only a wake-up gets the second job in time.
    await queue.consume<JobPayload<'webhook.deliver'>>(
      WEBHOOK_DELIVER_JOB,
      { maxInFlight: 10, batchSize: 10, pollingIntervalMs: 60_000, busyPollingIntervalMs: 10_000 },
      (jobs) =>
        jobs.map((job) => {
          seen.push(job.data.messageId);
          // Held: no settle wakes the loop.
          return new Promise<typeof SETTLED>(() => {});
        }),
    );
    await enqueue(newId('webhookMessage'));
    await waitFor(async () => (seen.length >= 1 ? true : undefined), 5_000, 'the first job');
    // The loop is busy now and napping after its short fetch.
    await new Promise((resolve) => setTimeout(resolve, 200));
    const second = newId('webhookMessage');
    const enqueuedAt = Date.now();
    await enqueue(second);
    await waitFor(async () => (seen.length >= 2 ? true : undefined), 5_000, 'the second job');
    expect(seen[1]).toBe(second);
    expect(Date.now() - enqueuedAt).toBeLessThan(2_000);
  }, 20_000);
});
