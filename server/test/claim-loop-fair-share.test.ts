import type { PgBoss } from 'pg-boss';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ClaimLoop, type JobSettler } from '../src/jobs/claim-loop.ts';
import type { JobQueue } from '../src/jobs/queue.ts';
import { reservedSlots } from '../src/reserved-slots.ts';
import { waitFor } from './helpers/app.ts';
import { startTestJobQueue } from './helpers/job-queue.ts';

/**
 * Fairness between groups (teams) in one claim loop: the global group cap bounds one team, and a
 * last tenth of the loop's slots goes only to teams holding none, so several teams whose sends hang until
 * the deadline cannot keep every slot while another team's emails wait (review finding, session 15).
 */
describe('claim loop slots between groups', () => {
  let queue: JobQueue;
  let close: () => Promise<void>;

  beforeAll(async () => {
    ({ queue, close } = await startTestJobQueue(['test.fair']));
  });
  afterAll(async () => {
    await close?.();
  });

  it('keeps a tenth of the slots (at least one) for groups holding none', () => {
    expect(reservedSlots(200)).toBe(20);
    expect(reservedSlots(20)).toBe(2);
    expect(reservedSlots(4)).toBe(1);
    expect(reservedSlots(1)).toBe(1);
  });

  it('lets a lone team reach its cap in a small worker and across two workers', async () => {
    await queue.boss.createQueue('test.lone');
    await queue.boss.insert(
      'test.lone',
      Array.from({ length: 120 }, (_, n) => ({ data: { n }, group: { id: 'lone-team' } })),
    );
    let inFlight = 0;
    let mostLater = 0;
    let done = 0;
    const handler = (jobs: { data: { n: number } }[]) =>
      jobs.map(async () => {
        inFlight += 1;
        // Past the first fetches.
        if (done >= 32) mostLater = Math.max(mostLater, inFlight);
        await new Promise((resolve) => setTimeout(resolve, 100));
        inFlight -= 1;
        done += 1;
        return undefined;
      });
    // Two workers of 20 slots, a team cap of 16 across both (review finding, session 17: a per-worker
    // share passed to pg-boss as the team's cap across every worker held the team at 10).
    for (let worker = 0; worker < 2; worker++) {
      await queue.consume<{ n: number }>(
        'test.lone',
        { maxInFlight: 20, batchSize: 20, groupConcurrency: 16, pollingIntervalMs: 50 },
        handler,
      );
    }
    await waitFor(async () => (done >= 120 ? true : undefined), 30_000, 'every job');
    // (pg-boss's group cap is not atomic across two workers fetching at once: 16 or a little more.)
    expect(mostLater).toBeGreaterThanOrEqual(16);
  }, 40_000);

  it("serves a later team while three teams' slow jobs still have a backlog", async () => {
    const slow = ['team-a', 'team-b', 'team-c'];
    const perSlowTeam = 60;
    const maxInFlight = 20;
    // 3 × 12 > 20: without the reserve, the slow teams' backlog (queued first) takes every freed slot.
    const cap = 12;
    await queue.boss.insert(
      'test.fair',
      slow.flatMap((team) =>
        Array.from({ length: perSlowTeam }, (_, n) => ({ data: { team, n }, group: { id: team } })),
      ),
    );
    let slowDone = 0;
    let slowDoneWhenLaterTeamServed: number | undefined;
    let laterTeamDone = 0;
    await queue.consume<{ team: string; n: number }>(
      'test.fair',
      { maxInFlight, batchSize: maxInFlight, groupConcurrency: cap, pollingIntervalMs: 100 },
      (jobs) =>
        jobs.map(async (job) => {
          const { team } = job.data;
          if (team === 'team-d') {
            laterTeamDone += 1;
            if (laterTeamDone === 5) slowDoneWhenLaterTeamServed = slowDone;
            return undefined;
          }
          // A send hanging until its deadline.
          await new Promise((resolve) => setTimeout(resolve, 300));
          slowDone += 1;
          return undefined;
        }),
    );
    // The later team's emails come once the slow teams hold the worker (past their first rounds).
    await waitFor(async () => (slowDone >= 40 ? true : undefined), 30_000, 'the slow rounds');
    const slowDoneWhenLaterTeamCame = slowDone;
    await queue.boss.insert(
      'test.fair',
      Array.from({ length: 5 }, (_, n) => ({ data: { team: 'team-d', n }, group: { id: 'team-d' } })),
    );
    await waitFor(
      async () => (slowDone >= slow.length * perSlowTeam && laterTeamDone >= 5 ? true : undefined),
      30_000,
      'every job',
    );
    // Served from the slots kept free, before a round of the slow jobs (20) ended: before, only once
    // fewer than 20 of the slow teams' 180 jobs were left (85 more of them ended first here).
    expect(slowDoneWhenLaterTeamServed).toBeDefined();
    expect(slowDoneWhenLaterTeamServed! - slowDoneWhenLaterTeamCame).toBeLessThan(20);
  }, 40_000);
});

describe('claim loop group counts', () => {
  it('a job claimed again while its lapsed claim is still held counts once for its group', async () => {
    // A pg-boss stand-in: the same job comes twice (its first claim lapsed, a later fetch claimed
    // it again), then nothing.
    const job = (retryCount: number) => ({
      id: 'job-1',
      name: 'test.twice',
      data: {},
      retryCount,
      retryLimit: 3,
      groupId: 'team-a',
    });
    const fetches = [[job(0)], [job(1)]];
    const boss = {
      fetch: async () => fetches.shift() ?? [],
      complete: async () => ({}),
      fail: async () => ({}),
    };
    let releaseFirst: () => void = () => {};
    let handled = 0;
    const loop = new ClaimLoop<object>(
      boss as unknown as PgBoss,
      'test.twice',
      {
        maxInFlight: 4,
        batchSize: 4,
        groupConcurrency: 4,
        pollingIntervalMs: 20,
        deadLetter: async () => {},
        settler: {} as JobSettler,
        onError: () => {},
      },
      (jobs) =>
        jobs.map(() => {
          handled += 1;
          // The first claim's handler hangs until after the second settled.
          return handled === 1
            ? new Promise<undefined>((resolve) => {
                releaseFirst = () => resolve(undefined);
              })
            : Promise.resolve(undefined);
        }),
    );
    loop.start();
    await waitFor(async () => (handled === 2 && loop.inFlight === 0 ? true : undefined), 5_000);
    releaseFirst();
    await new Promise((resolve) => setTimeout(resolve, 50));
    // Before: the group kept a held job for good (and with it a place among the groups holding jobs).
    expect(loop.groupsHolding).toBe(0);
    await loop.stop(1_000);
  });
});
