import { describe, expect, it } from 'vitest';
import { emptyFetchWait } from './claim-loop.ts';

/** The busy loop's back-off after empty fetches (the loop itself: server/test/claim-loop-polling.test.ts). */
describe('emptyFetchWait', () => {
  it('doubles the busy wait after each empty fetch in a row, up to the idle interval', () => {
    expect([0, 1, 2, 3, 4, 5, 6].map((empty) => emptyFetchWait(20, 400, empty))).toEqual([
      20, 20, 40, 80, 160, 320, 400,
    ]);
  });
});
