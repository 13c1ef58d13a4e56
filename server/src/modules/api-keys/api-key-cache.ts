import { LRUCache } from 'lru-cache';
import type { ApiKeyRow } from './api-keys.repository.ts';

/**
 * How long a key looked up by its secret is served from this process's memory (ms), so the hot path
 * (`X-API-Key` verification) costs no database round trip (issue #9). It is also the bound on how
 * long a key revoked, deleted, regenerated or deactivated through ANOTHER process keeps working
 * here; the process that made the change forgets the key at once (README "API keys").
 */
export const API_KEY_CACHE_TTL_MS = 5_000;

/** Keys held at most (least recently used dropped first): memory stays bounded under many keys. */
export const API_KEY_CACHE_MAX_KEYS = 10_000;

/** Verified keys of one process, by the SHA-256 of their secret (see {@link createApiKeyCache}). */
export interface ApiKeyCache {
  /**
   * The key whose secret hashes to `keyHash`: from memory when read less than
   * {@link API_KEY_CACHE_TTL_MS} ago, else from `load` (the database). Unknown hashes are not kept.
   * The row returned is the cached one, shared by later requests (lastUsedAt is updated on it).
   */
  get(keyHash: string, load: () => Promise<ApiKeyRow | undefined>): Promise<ApiKeyRow | undefined>;
  /** Forgets key `id` now: this process changed or deleted it. */
  evict(id: string): void;
}

/**
 * A bounded LRU (lru-cache) of key rows, each kept until {@link API_KEY_CACHE_TTL_MS} after the
 * start of the database read that produced it; concurrent requests with the same uncached key wait
 * for one read (each read of an uncached key takes its client's unknown-key budget until the key
 * is found: 200 first requests at once with a real key were otherwise refused 429 past the 30th). A load that started before an
 * {@link ApiKeyCache.evict} is returned but not kept, so a row read just before a change made by
 * this process cannot be cached after it.
 */
export function createApiKeyCache(options: { ttlMs?: number; maxKeys?: number } = {}): ApiKeyCache {
  const ttlMs = options.ttlMs ?? API_KEY_CACHE_TTL_MS;
  const rows = new LRUCache<string, ApiKeyRow>({
    max: options.maxKeys ?? API_KEY_CACHE_MAX_KEYS,
    ttl: ttlMs,
    // The TTL counts from the database read, not from the last use.
    updateAgeOnGet: false,
  });
  let evictions = 0;
  /** Loads under way, by key hash: concurrent requests with one uncached key share one read. */
  const loading = new Map<string, Promise<ApiKeyRow | undefined>>();
  const loadAndKeep = async (keyHash: string, load: () => Promise<ApiKeyRow | undefined>) => {
    const evictionsBefore = evictions;
    const loadStartedAt = Date.now();
    const row = await load();
    // The row is as old as the read's start: it may be served until ttlMs after that, no later.
    const ttl = ttlMs - (Date.now() - loadStartedAt);
    if (row && evictions === evictionsBefore && ttl > 0) rows.set(keyHash, row, { ttl });
    return row;
  };
  return {
    async get(keyHash, load) {
      const cached = rows.get(keyHash);
      if (cached) return cached;
      const shared = loading.get(keyHash);
      if (shared) {
        // A load that failed failed for its own caller (e.g. that client's unknown-key budget,
        // unknown-key-throttle.ts): this caller reads for itself.
        try {
          return await shared;
        } catch {
          return loadAndKeep(keyHash, load);
        }
      }
      const read = loadAndKeep(keyHash, load).finally(() => loading.delete(keyHash));
      loading.set(keyHash, read);
      return read;
    },
    evict(id) {
      evictions++;
      // A request after the change must read for itself, not share a read that began before it
      // (review finding, session 18: it got the deleted key's row back).
      loading.clear();
      for (const [keyHash, row] of rows.entries()) {
        if (row.id === id) rows.delete(keyHash);
      }
    },
  };
}
