import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { JobQueue } from '../src/jobs/queue.ts';
import { waitFor } from './helpers/app.ts';
import { createTestDatabase } from './helpers/database.ts';

/**
 * The claim loop's busy polling interval (`busyPollingIntervalMs`, used by `webhook.deliver`):
 * pg-boss has no notification of new jobs, so while a queue keeps finding jobs the loop waits the
 * short interval between empty fetches instead of the idle one.
 */
describe('claim loop polling', () => {
  let queue: JobQueue;
  let drop: () => Promise<void>;
  const handled: string[] = [];

  beforeAll(async () => {
    const database = await createTestDatabase();
    drop = database.drop;
    queue = new JobQueue(database.handle);
    await queue.start();
    await queue.boss.createQueue('test.busy');
  });
  afterAll(async () => {
    await queue?.stop(2_000);
    await drop?.();
  });

  it('a job sent while the queue is busy is picked up without waiting the idle interval', async () => {
    const first = await queue.boss.send('test.busy', { n: 1 });
    await queue.consume<{ n: number }>(
      'test.busy',
      // Idle: a minute between empty fetches; busy: 20 ms.
      { maxInFlight: 10, batchSize: 10, pollingIntervalMs: 60_000, busyPollingIntervalMs: 20 },
      (jobs) =>
        jobs.map(async (job) => {
          handled.push(job.id);
          return undefined;
        }),
    );
    await waitFor(async () => (handled.length >= 1 ? true : undefined), 10_000, 'the first job');
    expect(handled[0]).toBe(first);
    // Let the loop go back to napping after its empty fetch, then send the next job.
    await new Promise((resolve) => setTimeout(resolve, 300));
    const second = await queue.boss.send('test.busy', { n: 2 });
    // Well within the idle interval (a minute): the loop still counts as busy (BUSY_WINDOW_MS).
    await waitFor(async () => (handled.length >= 2 ? true : undefined), 10_000, 'the second job');
    expect(handled[1]).toBe(second);
  }, 20_000);
});
