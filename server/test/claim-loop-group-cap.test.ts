import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { JobQueue } from '../src/jobs/queue.ts';
import { waitFor } from './helpers/app.ts';
import { startTestJobQueue } from './helpers/job-queue.ts';

/**
 * The claim loop under a group cap (pg-boss `groupConcurrency`, a team's sends in flight): pg-boss
 * locks as many rows as a fetch asks for before it applies the cap, so once a fetch came back short
 * the loop asks for about what the capped group can take, not for a full batch.
 */
describe('claim loop under a group cap', () => {
  let queue: JobQueue;
  let close: () => Promise<void>;

  beforeAll(async () => {
    ({ queue, close } = await startTestJobQueue(['test.capped']));
  });
  afterAll(async () => {
    await close?.();
  });

  it('keeps the cap and asks for about what the capped group can take after a short fetch', async () => {
    const total = 60;
    const cap = 5;
    await queue.boss.insert(
      'test.capped',
      Array.from({ length: total }, (_, n) => ({ data: { n }, group: { id: 'one-team' } })),
    );
    /** What each fetch asked for, and how many jobs were still unclaimed then. */
    const asked: { size: number; unclaimed: number }[] = [];
    const boss = queue.boss as unknown as {
      fetch: (name: string, options: { batchSize: number }) => unknown;
    };
    const fetch = boss.fetch.bind(queue.boss);
    boss.fetch = (name, options) => {
      if (name === 'test.capped')
        asked.push({ size: options.batchSize, unclaimed: total - handled.size - inFlight });
      return fetch(name, options);
    };
    const handled = new Map<number, number>();
    let inFlight = 0;
    let most = 0;
    await queue.consume<{ n: number }>(
      'test.capped',
      { maxInFlight: 50, batchSize: 50, groupConcurrency: cap, pollingIntervalMs: 100 },
      (jobs) =>
        jobs.map(async (job) => {
          inFlight += 1;
          most = Math.max(most, inFlight);
          await new Promise((resolve) => setTimeout(resolve, 20));
          inFlight -= 1;
          handled.set(job.data.n, (handled.get(job.data.n) ?? 0) + 1);
          return undefined;
        }),
    );
    await waitFor(async () => (handled.size >= total ? true : undefined), 30_000, 'every job');
    expect([...handled.values()].every((times) => times === 1)).toBe(true);
    expect(most).toBeLessThanOrEqual(cap);
    // The first fetch asks for a full batch (45: the last tenth of the 50 slots is kept for other
    // teams) and gets the cap (5); later ones ask for a few
    // times the slots freed meanwhile (before: 45-50 rows locked each time to claim at most 5).
    // (Once fewer jobs are left than it asks for, a fetch finds all there are and the next asks
    // for a full batch again: nothing is left to lock.)
    expect(asked[0]?.size).toBe(45);
    const whileBacklog = asked.slice(1).filter((fetch) => fetch.unclaimed > 4 * cap);
    expect(whileBacklog.length).toBeGreaterThan(3);
    expect(Math.max(...whileBacklog.map((fetch) => fetch.size))).toBeLessThanOrEqual(4 * cap);
  }, 40_000);
});
