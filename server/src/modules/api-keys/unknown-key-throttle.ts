import ipaddr from 'ipaddr.js';
import { LRUCache } from 'lru-cache';

/**
 * Lookups of unknown API keys one client may cause per minute. A key the cache does not hold costs a
 * database read, and an unknown key is never cached (api-key-cache.ts), so without a bound anyone,
 * with no credential at all, could spend the connection pool that accepted sends and the worker
 * share with a stream of made-up `svc_` keys. A client that only ever sends its real keys never
 * comes near it (a key found is cached for 5 s and counts nothing).
 */
export const UNKNOWN_KEYS_PER_MINUTE = 30;

/** Clients remembered at most (least recently seen dropped first): memory stays bounded. */
const CLIENTS_KEPT = 50_000;
const WINDOW_MS = 60_000;

/** Counts a client's lookups of unknown keys and says when it must wait (per process, in memory). */
export interface UnknownKeyThrottle {
  /**
   * Takes one lookup of an uncached key from `client`'s budget BEFORE the lookup is made: 0 when it
   * may look up now (counted; give it back with {@link release} if the key is found), else the
   * seconds until it may (≥ 1; nothing counted): it has {@link UNKNOWN_KEYS_PER_MINUTE} lookups
   * of unknown keys, made or under way, in its current minute. Counted only after the read, any
   * number of concurrent requests passed the check before the first was counted: 200 at once all
   * reached the database (review finding, session 18).
   */
  reserve(client: string, now?: number): number;
  /** Gives back a lookup {@link reserve} took for `client` whose key was found (only unknown keys count). */
  release(client: string, now?: number): void;
}

/**
 * The client a request is counted as: its IPv4 address, or the /64 network of its IPv6 address
 * (one host usually holds a whole /64, so counting single IPv6 addresses would not bound it);
 * an IPv4-mapped IPv6 address counts as its IPv4 address. `ip` is Fastify's `request.ip`
 * (TRUST_PROXY decides whether it comes from X-Forwarded-For).
 */
export function throttleClientOf(ip: string): string {
  if (!ipaddr.isValid(ip)) return ip;
  const address = ipaddr.process(ip);
  if (address.kind() === 'ipv4') return address.toString();
  return `${(address as ipaddr.IPv6).parts
    .slice(0, 4)
    .map((part) => part.toString(16))
    .join(':')}::/64`;
}

/**
 * A fixed one-minute window per client, started by its first unknown key, in a bounded LRU
 * (lru-cache). Per process: with several API processes a client gets this budget in each.
 */
export function createUnknownKeyThrottle(limit = UNKNOWN_KEYS_PER_MINUTE): UnknownKeyThrottle {
  const windows = new LRUCache<string, { startedAt: number; count: number }>({ max: CLIENTS_KEPT });
  const current = (client: string, now: number) => {
    const window = windows.get(client);
    return window && now - window.startedAt < WINDOW_MS ? window : undefined;
  };
  return {
    reserve(client, now = Date.now()) {
      const window = current(client, now);
      if (!window) {
        windows.set(client, { startedAt: now, count: 1 });
        return 0;
      }
      if (window.count < limit) {
        window.count++;
        return 0;
      }
      return Math.max(1, Math.ceil((window.startedAt + WINDOW_MS - now) / 1000));
    },
    release(client, now = Date.now()) {
      const window = current(client, now);
      if (window && window.count > 0) window.count--;
    },
  };
}
