import { LRUCache } from 'lru-cache';

/**
 * A short-lived, per-process cache of rows the send path reads on every request (issue #9 "Cheap
 * hot path"): a hit costs no database round trip. Entries are per team and expire `ttlMs` after
 * they were loaded. Writers in this process call {@link TeamReadCache.forgetTeam} after their
 * transaction commits, so this process sees its own changes at once; another process (a second
 * `--role api`) sees them within `ttlMs`. Misses and errors are not cached.
 * Cached values are shared between callers: treat them as read-only.
 */
export class TeamReadCache<V extends object> {
  readonly #cache: LRUCache<string, V>;
  /** Bumped by every forget: a load that started before it is not stored (it may be stale). */
  #generation = 0;

  /**
   * @param options.max entries kept (least recently used go first); options.ttlMs their lifetime;
   *   options.maxBytes, with options.weigh (a value's estimated bytes, e.g. estimatedHeapBytes),
   *   the most bytes kept: the least recently used go first past it, and a value weighing more is
   *   not kept at all. Expired entries are dropped only when reached or pushed out, so without
   *   maxBytes the cache may hold `max` entries long after their `ttlMs`.
   */
  constructor(options: { max: number; ttlMs: number; maxBytes?: number; weigh?: (value: V) => number }) {
    const { maxBytes, weigh } = options;
    this.#cache = new LRUCache<string, V>({
      max: options.max,
      ttl: options.ttlMs,
      ...(maxBytes !== undefined && weigh
        ? { maxSize: maxBytes, sizeCalculation: (value: V) => Math.max(1, Math.ceil(weigh(value))) }
        : {}),
    });
  }

  /** The estimated bytes kept now (0 without `maxBytes`), for tests and diagnostics. */
  get bytes(): number {
    return this.#cache.calculatedSize;
  }

  /** The cached value of (`teamId`, `key`), or what `load` returns (then cached unless forgotten meanwhile). */
  async get(teamId: string, key: string, load: () => Promise<V>): Promise<V> {
    const cacheKey = `${teamId}\n${key}`;
    const hit = this.#cache.get(cacheKey);
    if (hit !== undefined) return hit;
    const generation = this.#generation;
    const value = await load();
    if (generation === this.#generation) this.#cache.set(cacheKey, value);
    return value;
  }

  /** Drops every entry of `teamId`; call after a change to what the entries were loaded from commits. */
  forgetTeam(teamId: string): void {
    this.#generation++;
    const prefix = `${teamId}\n`;
    for (const key of [...this.#cache.keys()]) if (key.startsWith(prefix)) this.#cache.delete(key);
  }
}
