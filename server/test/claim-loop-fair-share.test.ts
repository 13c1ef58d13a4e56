import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { groupShare } from '../src/fair-share.ts';
import { JobQueue } from '../src/jobs/queue.ts';
import { waitFor } from './helpers/app.ts';
import { createTestDatabase } from './helpers/database.ts';

/**
 * Fairness between groups (teams) in one claim loop: the global group cap bounds one team, and a
 * team also holds at most its share of the loop's slots, so several teams whose sends hang until
 * the deadline cannot keep every slot while another team's emails wait (review finding, session 15).
 */
describe('claim loop fair share between groups', () => {
  let queue: JobQueue;
  let drop: () => Promise<void>;

  beforeAll(async () => {
    const database = await createTestDatabase();
    drop = database.drop;
    queue = new JobQueue(database.handle);
    await queue.start();
    await queue.boss.createQueue('test.fair');
  });
  afterAll(async () => {
    await queue?.stop(5_000);
    await drop?.();
  });

  it('splits the slots max-min fairly among the groups, with room for one more', () => {
    const back = (held: number) => ({ held, heldBack: true });
    const keeping = (held: number) => ({ held, heldBack: false });
    expect(groupShare(200, [])).toBe(200);
    // One busy team alone: half, and more once it is known to want no more than it holds.
    expect(groupShare(200, [back(80)])).toBe(100);
    expect(groupShare(200, [keeping(80)])).toBe(120);
    // Three teams held back (slow sends): a quarter each, the last quarter for anyone else.
    expect(groupShare(200, [back(80), back(80), back(0)])).toBe(50);
    // A hundred teams with one email each do not shrink a busy team to theirs.
    expect(groupShare(200, [back(80), ...Array.from({ length: 100 }, () => keeping(1))])).toBe(50);
    // A team holding more than an even split is not counted as content with it.
    expect(groupShare(200, [keeping(40), keeping(80), keeping(80)])).toBe(53);
    expect(
      groupShare(
        200,
        Array.from({ length: 500 }, () => back(1)),
      ),
    ).toBe(1);
  });

  it("serves a later team while three teams' slow jobs still have a backlog", async () => {
    const slow = ['team-a', 'team-b', 'team-c'];
    const perSlowTeam = 24;
    const maxInFlight = 20;
    // 3 × 8 > 20: without a share, the slow teams' backlog (queued first) takes every freed slot.
    const cap = 8;
    await queue.boss.insert(
      'test.fair',
      slow.flatMap((team) =>
        Array.from({ length: perSlowTeam }, (_, n) => ({ data: { team, n }, group: { id: team } })),
      ),
    );
    await queue.boss.insert(
      'test.fair',
      Array.from({ length: 5 }, (_, n) => ({ data: { team: 'team-d', n }, group: { id: 'team-d' } })),
    );
    const inFlight = new Map<string, number>();
    const mostAfterFirstWave = new Map<string, number>();
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
          const now = (inFlight.get(team) ?? 0) + 1;
          inFlight.set(team, now);
          // The first wave was claimed before the share knew of three teams; later claims keep it.
          if (slowDone >= maxInFlight)
            mostAfterFirstWave.set(team, Math.max(mostAfterFirstWave.get(team) ?? 0, now));
          // A send hanging until its deadline.
          await new Promise((resolve) => setTimeout(resolve, 300));
          inFlight.set(team, (inFlight.get(team) ?? 1) - 1);
          slowDone += 1;
          return undefined;
        }),
    );
    await waitFor(
      async () => (slowDone >= slow.length * perSlowTeam && laterTeamDone >= 5 ? true : undefined),
      30_000,
      'every job',
    );
    // The later team was served while the slow teams still had most of their backlog (without the
    // share: only once fewer than 20 of their 72 jobs were left, i.e. after 52 or more).
    expect(slowDoneWhenLaterTeamServed).toBeDefined();
    expect(slowDoneWhenLaterTeamServed!).toBeLessThan(40);
    // Past the first wave, each slow team stayed within its share of the 20 slots: shared with one
    // more group, ⌊20 / 3⌋ = 6 at most (the global cap alone let each take 8).
    for (const team of slow) expect(mostAfterFirstWave.get(team) ?? 0).toBeLessThanOrEqual(6);
  }, 40_000);
});
