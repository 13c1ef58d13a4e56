import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import type { Database } from './client.ts';
import { GroupCommit } from './group-commit.ts';

/**
 * How GroupCommit forms batches. The transaction runner here only records calls (the database
 * behaviour — one transaction, savepoints, rollbacks — is tested on PostgreSQL in
 * server/test/send-group-commit.test.ts).
 */
function recordingDatabase(writeDelayMs: number) {
  const batches: number[][] = [];
  let open = 0;
  let peak = 0;
  const db = {
    async transaction<R>(fn: (tx: unknown) => Promise<R>): Promise<R> {
      open++;
      peak = Math.max(peak, open);
      try {
        return await fn({
          async transaction<S>(inner: (tx: unknown) => Promise<S>) {
            return inner({});
          },
        });
      } finally {
        open--;
      }
    },
  } as unknown as Database;
  const write = async (_tx: unknown, items: number[]) => {
    batches.push(items);
    if (writeDelayMs > 0) await new Promise((resolve) => setTimeout(resolve, writeDelayMs));
    if (items.length === 1 && items[0]! < 0) throw new Error(`bad item ${items[0]}`);
    if (items.some((item) => item < 0)) throw new Error('batch has a bad item');
  };
  return { db, write, batches, peak: () => peak };
}

describe('GroupCommit', () => {
  it('commits a lone item at once when a transaction slot is free (no window delay)', async () => {
    // No wall clock: timers are faked and never advanced, so a batch waiting on any setTimeout
    // (however short) would never start; only the end of the event-loop turn may be waited for.
    vi.useFakeTimers({ toFake: ['setTimeout', 'setInterval'] });
    try {
      const { db, write, batches } = recordingDatabase(0);
      const group = new GroupCommit<number>(db, { write, maxBatch: 64, windowMs: 0, maxInFlight: 1 });
      let committed = false;
      void group.submit(1).then(() => {
        committed = true;
      });
      for (let turn = 0; turn < 5 && !committed; turn++)
        await new Promise((resolve) => setImmediate(resolve));
      expect(committed).toBe(true);
      expect(batches).toEqual([[1]]);
    } finally {
      vi.useRealTimers();
    }
  });

  it('waits up to windowMs after the first item for others to join', async () => {
    const { db, write, batches } = recordingDatabase(0);
    const group = new GroupCommit<number>(db, { write, maxBatch: 64, windowMs: 30, maxInFlight: 1 });
    const first = group.submit(1);
    await new Promise((resolve) => setTimeout(resolve, 5));
    await Promise.all([first, group.submit(2)]);
    expect(batches).toEqual([[1, 2]]);
  });

  it('caps batches at maxBatch and transactions at maxInFlight; items arriving meanwhile form the next batch', async () => {
    const { db, write, batches, peak } = recordingDatabase(20);
    const group = new GroupCommit<number>(db, { write, maxBatch: 4, windowMs: 0, maxInFlight: 2 });
    const items = Array.from({ length: 11 }, (_, i) => i + 1);
    await Promise.all(items.map((item) => group.submit(item)));
    expect(peak()).toBe(2);
    expect(batches.every((batch) => batch.length <= 4)).toBe(true);
    expect(batches.flat().sort((a, b) => a - b)).toEqual(items);
    expect(batches.length).toBe(3);
    expect(group.stats).toEqual({ batches: 3, items: 11, isolatedBatches: 0 });
  });

  it('drains: resolves once every submitted item is committed', async () => {
    const { db, write, batches } = recordingDatabase(20);
    const group = new GroupCommit<number>(db, { write, maxBatch: 2, windowMs: 0, maxInFlight: 1 });
    const committed: number[] = [];
    for (const item of [1, 2, 3, 4, 5]) void group.submit(item).then(() => committed.push(item));
    await group.drain();
    expect(batches.flat()).toEqual([1, 2, 3, 4, 5]);
    await Promise.resolve();
    expect(committed.sort()).toEqual([1, 2, 3, 4, 5]);
  });

  it('rejects only the bad item of a failed batch, with its own error', async () => {
    const { db, write, batches } = recordingDatabase(0);
    const group = new GroupCommit<number>(db, { write, maxBatch: 64, windowMs: 0, maxInFlight: 1 });
    const outcomes = await Promise.allSettled([1, -2, 3].map((item) => group.submit(item)));
    expect(outcomes.map((o) => o.status)).toEqual(['fulfilled', 'rejected', 'fulfilled']);
    expect((outcomes[1] as PromiseRejectedResult).reason.message).toBe('bad item -2');
    expect(batches).toEqual([[1, -2, 3], [1], [-2], [3]]);
    expect(group.stats).toEqual({ batches: 1, items: 2, isolatedBatches: 1 });
  });
  it('submitTogether: all items in one transaction of their own, beyond maxBatch, apart from other submits; a bad item fails alone', async () => {
    const { db, write, batches } = recordingDatabase(10);
    const group = new GroupCommit<number>(db, { write, maxBatch: 2, windowMs: 0, maxInFlight: 1 });
    const lone = group.submit(100);
    const together = group.submitTogether([1, 2, 3, 4, 5]);
    await lone;
    expect(await together).toEqual(Array(5).fill({ status: 'fulfilled', value: undefined }));
    expect(batches).toContainEqual([1, 2, 3, 4, 5]);
    expect(batches).toContainEqual([100]);

    batches.length = 0;
    const outcomes = await group.submitTogether([6, -7, 8]);
    expect(outcomes.map((o) => o.status)).toEqual(['fulfilled', 'rejected', 'fulfilled']);
    expect(batches).toEqual([[6, -7, 8], [6], [-7], [8]]);
    expect(await group.submitTogether([])).toEqual([]);
  });

  it('refuses items submitted after refuseNew, and still commits those submitted before', async () => {
    const { db, write, batches } = recordingDatabase(20);
    const group = new GroupCommit<number>(db, { write, maxBatch: 10, windowMs: 0, maxInFlight: 1 });
    const before = group.submit(1);
    const stopping = new Error('stopping');
    group.refuseNew(stopping);
    await expect(group.submit(2)).rejects.toBe(stopping);
    await expect(group.submitTogether([3, 4])).rejects.toBe(stopping);
    await expect(before).resolves.toBeUndefined();
    await group.drain();
    expect(batches).toEqual([[1]]);
  });

  describe('fill (a group-commit delay under load)', () => {
    // Timers faked and advanced only by the tests: a batch starts by reaching fill.items or when a
    // test moves the clock past fill.waitMs.
    beforeEach(() => {
      vi.useFakeTimers({ toFake: ['setTimeout', 'setInterval'] });
    });
    afterEach(() => {
      vi.useRealTimers();
    });
    const settle = async () => {
      for (let turn = 0; turn < 5; turn++) await new Promise((resolve) => setImmediate(resolve));
    };

    /** A group with `fill` whose write holds each batch until `release()` lets the oldest finish. */
    function filling(fill: { items: number; waitMs: number }) {
      const batches: number[][] = [];
      const gates: (() => void)[] = [];
      const db = {
        async transaction<R>(fn: (tx: unknown) => Promise<R>): Promise<R> {
          return fn({});
        },
      } as unknown as Database;
      const write = async (_tx: unknown, items: number[]) => {
        batches.push(items);
        await new Promise<void>((resolve) => gates.push(resolve));
      };
      const group = new GroupCommit<number>(db, { write, maxBatch: 64, windowMs: 0, maxInFlight: 1, fill });
      const release = async () => {
        gates.shift()?.();
        await settle();
      };
      return { group, batches, release };
    }

    it('after a batch, waits for fill.items (not the timer) when they come', async () => {
      const { group, batches, release } = filling({ items: 3, waitMs: 1_000 });
      const all = [group.submit(1)];
      await settle();
      expect(batches).toEqual([[1]]);
      all.push(group.submit(2), group.submit(3));
      await release();
      // Two waiting, fewer than fill.items: no batch yet.
      expect(batches).toEqual([[1]]);
      all.push(group.submit(4));
      await settle();
      expect(batches).toEqual([[1], [2, 3, 4]]);
      await release();
      await Promise.all(all);
    });

    it('starts the smaller batch once fill.waitMs has passed', async () => {
      const { group, batches, release } = filling({ items: 10, waitMs: 8 });
      const all = [group.submit(1)];
      await settle();
      all.push(group.submit(2));
      await release();
      expect(batches).toEqual([[1]]);
      vi.advanceTimersByTime(7);
      await settle();
      expect(batches).toEqual([[1]]);
      vi.advanceTimersByTime(1);
      await settle();
      expect(batches).toEqual([[1], [2]]);
      await release();
      await Promise.all(all);
    });

    it('an idle group still commits its first item at once', async () => {
      const { group, batches, release } = filling({ items: 10, waitMs: 1_000 });
      const one = group.submit(1);
      await settle();
      expect(batches).toEqual([[1]]);
      await release();
      await one;
    });
  });
});
