import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { dayWindows } from '../../web/src/pages/overview-days.ts';

/**
 * The dashboard Overview's per-day windows (web/src/pages/overview-days.ts) across daylight saving
 * changes (review finding, time 3): every local day is one window from its midnight to 1 ms before
 * the next, so the 25 h day loses no hour and the 23 h day shares none with the next.
 * Runs in the dashboard user's time zone, New York (process.env.TZ applies to Dates made after it is set).
 */
describe('Overview per-day windows', () => {
  const savedTz = process.env.TZ;
  beforeAll(() => {
    process.env.TZ = 'America/New_York';
  });
  afterAll(() => {
    if (savedTz === undefined) delete process.env.TZ;
    else process.env.TZ = savedTz;
  });

  const iso = (windows: ReturnType<typeof dayWindows>) =>
    windows.map(({ start, end }) => [start.toISOString(), end.toISOString()]);

  /** Each window starts at a local midnight and ends 1 ms before the next starts. */
  function expectContiguousDays(windows: ReturnType<typeof dayWindows>) {
    for (const [i, { start, end }] of windows.entries()) {
      expect([start.getHours(), start.getMinutes(), start.getSeconds(), start.getMilliseconds()]).toEqual([
        0, 0, 0, 0,
      ]);
      expect(end.getTime()).toBeGreaterThan(start.getTime());
      const next = windows[i + 1];
      if (next)
        expect(end.getTime() + 1, `day ${i} ends where day ${i + 1} starts`).toBe(next.start.getTime());
    }
  }

  it('the time zone is in effect', () => {
    expect(new Date('2026-07-01T12:00:00Z').getTimezoneOffset()).toBe(240);
  });

  it('covers the whole 25 h day when clocks fall back (2026-11-01)', () => {
    const windows = dayWindows(3, new Date('2026-11-02T17:00:00Z'));
    expect(iso(windows)).toEqual([
      ['2026-10-31T04:00:00.000Z', '2026-11-01T03:59:59.999Z'],
      ['2026-11-01T04:00:00.000Z', '2026-11-02T04:59:59.999Z'],
      ['2026-11-02T05:00:00.000Z', '2026-11-03T04:59:59.999Z'],
    ]);
  });

  it('ends the 23 h day where the next begins when clocks spring forward (2026-03-08)', () => {
    const windows = dayWindows(3, new Date('2026-03-09T16:00:00Z'));
    expect(iso(windows)).toEqual([
      ['2026-03-07T05:00:00.000Z', '2026-03-08T04:59:59.999Z'],
      ['2026-03-08T05:00:00.000Z', '2026-03-09T03:59:59.999Z'],
      ['2026-03-09T04:00:00.000Z', '2026-03-10T03:59:59.999Z'],
    ]);
  });

  it('tiles 30 days across a change without gap or overlap, today included', () => {
    const now = new Date('2026-11-27T17:00:00Z');
    const windows = dayWindows(30, now);
    expect(windows).toHaveLength(30);
    expectContiguousDays(windows);
    expect(windows[0]!.start.toISOString()).toBe('2026-10-29T04:00:00.000Z');
    expect(windows[29]!.start.toISOString()).toBe('2026-11-27T05:00:00.000Z');
    expect(windows[29]!.end.toISOString()).toBe('2026-11-28T04:59:59.999Z');
    expectContiguousDays(dayWindows(30, new Date('2026-03-20T16:00:00Z')));
  });
});
