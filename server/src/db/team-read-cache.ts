import { LRUCache } from 'lru-cache';

/**
 * A short-lived, per-process cache of rows the send path reads on every request (issue #9 "Cheap
 * hot path"): a hit costs no database round trip. Entries are per team and expire `ttlMs` after
 * their load STARTED (what a load returns is as old as its read: counted from when it was stored,
 * a load slowed by a busy pool or a lock served a row changed meanwhile for longer than `ttlMs`,
 * review finding, session 18); a load that took `ttlMs` or longer is not stored. Writers in this process call {@link TeamReadCache.forgetTeam} after their
 * transaction commits, so this process sees its own changes at once; another process (a second
 * `--role api`) sees them within `ttlMs`. Misses and errors are not cached.
 * Concurrent misses of one key share one load (single flight) while that load is younger than
 * `ttlMs` and no forget came after its start: what it returns is as fresh as a hit would be.
 * Session 22 (bench:send, the batch endpoint): a batch of 100 sends of one template missed together
 * and loaded the template, its version and the adapter 100 times each; those loads queued on the
 * pool past `ttlMs`, so none was kept and the next batch missed again (8,473 template reads for
 * ~12,000 accepted emails), and the batch endpoint accepted fewer emails per second than single
 * sends.
 * Cached values are shared between callers: treat them as read-only.
 */
export class TeamReadCache<V extends object> {
  readonly #cache: LRUCache<string, V>;
  /** Bumped by every forget: a load that started before it is not stored (it may be stale). */
  #generation = 0;
  /** Loads under way, by cache key, with the generation and the time (performance.now()) they started. */
  readonly #loading = new Map<string, { generation: number; started: number; value: Promise<V> }>();

  /**
   * @param options.max entries kept (least recently used go first); options.ttlMs their lifetime;
   *   options.maxBytes, with options.weigh (a value's estimated bytes, e.g. estimatedHeapBytes),
   *   the most bytes kept: the least recently used go first past it, and a value weighing more is
   *   not kept at all. Expired entries are dropped only when reached or pushed out, so without
   *   maxBytes the cache may hold `max` entries long after their `ttlMs`.
   */
  readonly #ttlMs: number;

  constructor(options: { max: number; ttlMs: number; maxBytes?: number; weigh?: (value: V) => number }) {
    const { maxBytes, weigh } = options;
    this.#ttlMs = options.ttlMs;
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

  /**
   * The cached value of (`teamId`, `key`); else the value of a load of it under way (see the class);
   * else what `load` returns (then cached unless forgotten meanwhile).
   * @throws what `load` throws (every caller sharing that load gets it; nothing is cached).
   */
  get(teamId: string, key: string, load: () => Promise<V>): Promise<V> {
    const cacheKey = `${teamId}\n${key}`;
    const hit = this.#cache.get(cacheKey);
    if (hit !== undefined) return Promise.resolve(hit);
    const now = performance.now();
    const underway = this.#loading.get(cacheKey);
    if (underway && underway.generation === this.#generation && now - underway.started < this.#ttlMs) {
      return underway.value;
    }
    const generation = this.#generation;
    // A load that throws at once is a rejection like any other.
    const value = new Promise<V>((resolve) => resolve(load())).then((loaded) => {
      const ttl = this.#ttlMs - (performance.now() - now);
      if (generation === this.#generation && ttl >= 1) this.#cache.set(cacheKey, loaded, { ttl });
      return loaded;
    });
    const entry = { generation, started: now, value };
    this.#loading.set(cacheKey, entry);
    const settled = () => {
      if (this.#loading.get(cacheKey) === entry) this.#loading.delete(cacheKey);
    };
    value.then(settled, settled);
    return value;
  }

  /** Drops every entry of `teamId`; call after a change to what the entries were loaded from commits. */
  forgetTeam(teamId: string): void {
    this.#generation++;
    const prefix = `${teamId}\n`;
    for (const key of [...this.#cache.keys()]) if (key.startsWith(prefix)) this.#cache.delete(key);
  }
}
