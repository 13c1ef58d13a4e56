import { setTimeout as sleep } from 'node:timers/promises';
import { describe, expect, it } from 'vitest';
import { estimatedHeapBytes } from '../heap-weight.ts';
import {
  createTemplateSendCache,
  TEMPLATE_SEND_CACHE_MAX_BYTES,
} from '../modules/templates/templates.send-cache.ts';
import { TeamReadCache } from './team-read-cache.ts';

/** A value of about `megabytes` MB of estimated heap (many empty objects, as a hostile design holds). */
function heavy(megabytes: number) {
  return {
    designJson: { junk: Array.from({ length: Math.round((megabytes * 1024 * 1024) / 64) }, () => ({})) },
  };
}

describe('TeamReadCache bounded in bytes (review finding, session 13)', () => {
  it('pushes out the least recently used past maxBytes, and keeps nothing heavier than it', async () => {
    const cache = new TeamReadCache<{ size: number }>({
      max: 100,
      ttlMs: 60_000,
      maxBytes: 100,
      weigh: (value) => value.size,
    });
    let loads = 0;
    const get = (key: string, size: number) =>
      cache.get('team', key, async () => {
        loads++;
        return { size };
      });
    await get('a', 40);
    await get('b', 40);
    await get('c', 40);
    expect(cache.bytes).toBe(80);
    await get('b', 40);
    await get('c', 40);
    expect(loads).toBe(3);
    await get('a', 40); // pushed out by c
    expect(loads).toBe(4);
    await get('huge', 101);
    await get('huge', 101);
    expect(loads).toBe(6);
    expect(cache.bytes).toBeLessThanOrEqual(100);
  });

  it('the send cache of templates keeps at most TEMPLATE_SEND_CACHE_MAX_BYTES of parsed designs', async () => {
    const cache = createTemplateSendCache();
    const entry = { template: heavy(8), version: heavy(8) } as never;
    expect(estimatedHeapBytes(entry)).toBeGreaterThan(16 * 1024 * 1024);
    let loads = 0;
    const load = async () => {
      loads++;
      return entry;
    };
    for (let i = 0; i < 8; i++) await cache.get('team', `t${i}`, load);
    expect(cache.bytes).toBeLessThanOrEqual(TEMPLATE_SEND_CACHE_MAX_BYTES);
    // 5,000 entries by count alone kept all eight (and, with 40 MB designs, exhausted the heap).
    await cache.get('team', 't0', load);
    expect(loads).toBe(9);
  });
});

describe('TeamReadCache lifetime (review finding, session 18)', () => {
  it('counts an entry’s lifetime from when its load started, and keeps nothing a slower load returned', async () => {
    const cache = new TeamReadCache<{ n: number }>({ max: 10, ttlMs: 1_000 });
    let loads = 0;
    const slowLoad = (ms: number) => async () => {
      loads++;
      await sleep(ms);
      return { n: loads };
    };
    // A load that took 700 ms of a 1 s lifetime is served for the 300 ms left, not 1 s more.
    await cache.get('team', 'a', slowLoad(700));
    await cache.get('team', 'a', slowLoad(0));
    expect(loads).toBe(1);
    await sleep(400);
    await cache.get('team', 'a', slowLoad(0));
    expect(loads).toBe(2);
    // A load longer than the lifetime is returned, not kept.
    await cache.get('team', 'b', slowLoad(1_050));
    await cache.get('team', 'b', slowLoad(0));
    expect(loads).toBe(4);
  });
});

describe('TeamReadCache: concurrent misses share one load (review finding, session 22)', () => {
  it('loads a key once for every caller that misses it while the load is under way', async () => {
    // bench:send's batch endpoint: 100 sends of one template loaded it 100 times at once.
    const cache = new TeamReadCache<{ n: number }>({ max: 10, ttlMs: 1_000 });
    let loads = 0;
    const load = async () => {
      loads++;
      await sleep(50);
      return { n: loads };
    };
    const values = await Promise.all(Array.from({ length: 20 }, () => cache.get('team', 'a', load)));
    expect(loads).toBe(1);
    expect(new Set(values).size).toBe(1);
    // Another key, or another team's, has its own load.
    await Promise.all([cache.get('team', 'b', load), cache.get('other', 'a', load)]);
    expect(loads).toBe(3);
  });

  it('does not join a load that a forget came after, nor one older than the lifetime', async () => {
    const cache = new TeamReadCache<{ n: number }>({ max: 10, ttlMs: 200 });
    let loads = 0;
    const load = (ms: number) => async () => {
      loads++;
      const n = loads;
      await sleep(ms);
      return { n };
    };
    const first = cache.get('team', 'a', load(100));
    cache.forgetTeam('team');
    // Its value may predate the change the forget announced: a new load.
    const second = cache.get('team', 'a', load(0));
    expect([(await first).n, (await second).n]).toEqual([1, 2]);

    const slow = cache.get('team', 'c', load(400));
    await sleep(250);
    // 250 ms into a load, more than the 200 ms an entry lives: a fresh load.
    const fresh = cache.get('team', 'c', load(0));
    expect([(await slow).n, (await fresh).n]).toEqual([3, 4]);
  });

  it('gives every caller sharing a load its error, and keeps nothing', async () => {
    const cache = new TeamReadCache<{ n: number }>({ max: 10, ttlMs: 1_000 });
    let loads = 0;
    const failing = async () => {
      loads++;
      await sleep(20);
      throw new Error('database gone');
    };
    const results = await Promise.allSettled([
      cache.get('team', 'a', failing),
      cache.get('team', 'a', failing),
    ]);
    expect(results.map((result) => result.status)).toEqual(['rejected', 'rejected']);
    expect(loads).toBe(1);
    expect(await cache.get('team', 'a', async () => ({ n: 7 }))).toEqual({ n: 7 });
  });
});
