import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { newId, newJobId } from '../src/ids.ts';
import { BUSY_WINDOW_MS } from '../src/jobs/claim-loop.ts';
import { WEBHOOK_DELIVER_JOB } from '../src/jobs/definitions.ts';
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
  let database: Awaited<ReturnType<typeof createTestDatabase>>;
  const handled: string[] = [];

  beforeAll(async () => {
    database = await createTestDatabase();
    drop = database.drop;
    queue = new JobQueue(database.handle);
    await queue.start();
    await queue.boss.createQueue('test.busy');
    await queue.boss.createQueue(WEBHOOK_DELIVER_JOB);
    await queue.boss.createQueue('test.capped-busy');
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

  it('an idle loop picks up a job this process enqueues without waiting the idle interval', async () => {
    const seen: string[] = [];
    await queue.consume<{ messageId: string }>(
      WEBHOOK_DELIVER_JOB,
      { maxInFlight: 10, batchSize: 10, pollingIntervalMs: 60_000, busyPollingIntervalMs: 20 },
      (jobs) =>
        jobs.map(async (job) => {
          seen.push(job.data.messageId);
          return undefined;
        }),
    );
    // Idle: its first fetch found nothing, and it stays idle past the busy window.
    await new Promise((resolve) => setTimeout(resolve, BUSY_WINDOW_MS + 500));
    const messageId = newId('webhookMessage');
    await database.handle.db.transaction(async (tx) => {
      await queue.enqueueMany(tx, WEBHOOK_DELIVER_JOB, [
        {
          id: newJobId().uuid,
          data: {
            webhookId: 'whk_x',
            teamId: 'team_x',
            messageId,
            event: 'email.sent',
            payload: {},
            attempt: 1,
          },
        },
      ]);
      // The nudge comes before the commit: the loop must still see the job once it is committed.
      await new Promise((resolve) => setTimeout(resolve, 100));
    });
    // Well within the idle interval (a minute).
    await waitFor(async () => (seen.length >= 1 ? true : undefined), 10_000, 'the enqueued job');
    expect(seen).toEqual([messageId]);
  }, 20_000);

  it('backs off while a group at its cap keeps it busy and its fetches find nothing', async () => {
    // Issue #11: a webhook at its cap with a backlog keeps the loop busy (its jobs come by
    // hand-off) while every fetch finds nothing — and pg-boss's fetch reads the group's whole
    // backlog to find that out. Polled every busy interval, that was ~20 fetches a second.
    const name = 'test.capped-busy';
    await queue.boss.insert(
      name,
      Array.from({ length: 40 }, (_, n) => ({ data: { n }, group: { id: 'hot' } })),
    );
    const fetches: number[] = [];
    const boss = queue.boss as unknown as { fetch: (name: string, options: unknown) => unknown };
    const fetch = boss.fetch.bind(queue.boss);
    boss.fetch = (fetched, options) => {
      if (fetched === name) fetches.push(Date.now());
      return fetch(fetched, options);
    };
    const held: { n: number; at: number; release: () => void }[] = [];
    await queue.consume<{ n: number }>(
      name,
      {
        maxInFlight: 10,
        batchSize: 10,
        groupConcurrency: 2,
        pollingIntervalMs: 400,
        busyPollingIntervalMs: 20,
      },
      (jobs) =>
        jobs.map(
          (job) =>
            new Promise<undefined>((resolve) =>
              held.push({ n: job.data.n, at: Date.now(), release: () => resolve(undefined) }),
            ),
        ),
    );
    try {
      await waitFor(async () => (held.length >= 2 ? true : undefined), 10_000, 'the capped group’s jobs');
      const from = Date.now();
      // Still within the busy window of the fetch that found them.
      await new Promise((resolve) => setTimeout(resolve, 1_500));
      const during = fetches.filter((at) => at >= from && at < from + 1_500).length;
      // Every 20 ms, that is ~75; backing off 20, 40, 80, 160, 320, 400 ms: ~7.
      expect(during).toBeLessThan(20);
      expect(held).toHaveLength(2);
      // A job of another group, enqueued elsewhere (no nudge), still comes within the idle interval.
      const sentAt = Date.now();
      await queue.boss.send(name, { n: 100 }, { group: { id: 'cold' } });
      const other = await waitFor(
        async () => held.find((job) => job.n === 100),
        5_000,
        'the other group’s job',
      );
      expect(other.at - sentAt).toBeLessThan(400 + 600);
    } finally {
      boss.fetch = fetch;
      for (const job of held) job.release();
    }
  }, 20_000);
});
