import { describe, expect, it } from 'vitest';
import type { Database } from '../../db/client.ts';
import {
  TRACKING_RECORDINGS_IN_FLIGHT,
  TRACKING_RECORDINGS_WAITING,
  TrackingRecorder,
} from './tracking.service.ts';

/** A database whose transactions run until `finish()` is called; `running()` counts them. */
function stalledDatabase() {
  const pending: (() => void)[] = [];
  const db = {
    transaction: () => new Promise<void>((resolve) => pending.push(resolve)),
  } as unknown as Database;
  return {
    db,
    running: () => pending.length,
    finish: () => {
      for (const resolve of pending.splice(0)) resolve();
    },
  };
}

const open = (emailId: string) => ({ kind: 'open' as const, emailId, teamId: 'team_1' });

describe('TrackingRecorder (review finding, session 14)', () => {
  it('runs one recording per hit key: joins the one under way, skips the ones done', async () => {
    const { db, running, finish } = stalledDatabase();
    const recorder = new TrackingRecorder(db);
    const hits = Array.from({ length: 50 }, () => recorder.record(open('eml_a')));
    await Promise.resolve();
    expect(running()).toBe(1);
    finish();
    expect(await Promise.all(hits)).toEqual(['recorded', ...Array<string>(49).fill('repeat')]);
    expect(await recorder.record(open('eml_a'))).toBe('repeat');
    // A click's implied open counts as the open.
    const click = recorder.record({
      kind: 'click',
      emailId: 'eml_b',
      teamId: 'team_1',
      url: 'https://a.example/',
    });
    await Promise.resolve();
    finish();
    expect(await click).toBe('recorded');
    expect(await recorder.record(open('eml_b'))).toBe('repeat');
    expect(running()).toBe(0);
  });

  it('runs a bounded number at once, queues a bounded number, and answers the rest as dropped', async () => {
    const { db, running, finish } = stalledDatabase();
    const recorder = new TrackingRecorder(db);
    const total = TRACKING_RECORDINGS_IN_FLIGHT + TRACKING_RECORDINGS_WAITING;
    const hits = Array.from({ length: total }, (_, i) => recorder.record(open(`eml_${i}`)));
    await new Promise((resolve) => setImmediate(resolve));
    expect(running()).toBe(TRACKING_RECORDINGS_IN_FLIGHT);
    expect(await recorder.record(open('eml_one_too_many'))).toBe('dropped');
    // Each finished recording hands its slot to a waiting one.
    while (running() > 0) {
      finish();
      await new Promise((resolve) => setImmediate(resolve));
    }
    expect(new Set(await Promise.all(hits))).toEqual(new Set(['recorded']));
  });
});
