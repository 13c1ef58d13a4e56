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

/** Ends a lookup {@link UnknownKeyThrottle.begin} let start: `unknown` when no key had that secret. */
export type LookupDone = (unknown: boolean) => void;

/** Counts a client's lookups of unknown keys and says when it must wait (per process, in memory). */
export interface UnknownKeyThrottle {
  /**
   * Lets `client` look up an uncached key: resolves with the function to call when the read ends,
   * or with the seconds until it may (≥ 1) once it has caused {@link UNKNOWN_KEYS_PER_MINUTE}
   * lookups of unknown keys in its current minute. At most that many of its lookups run at once
   * minus the unknown ones counted: a lookup beyond waits for one under way to end, then is judged
   * again. So the bound holds for concurrent requests (counted only after each read, 200 at once
   * all reached the database), while real keys are never refused for lookups of real keys (counted
   * at the start, 70 of 100 real keys sent at once were refused; review findings, session 18).
   */
  begin(client: string): Promise<LookupDone | number>;
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
 * A fixed one-minute window per client, started by its first lookup, in a bounded LRU (lru-cache).
 * Per process: with several API processes a client gets this budget in each.
 */
export function createUnknownKeyThrottle(limit = UNKNOWN_KEYS_PER_MINUTE): UnknownKeyThrottle {
  interface Window {
    startedAt: number;
    /** Lookups in this window that found no key. */
    unknown: number;
    /** Lookups under way (across windows). */
    inFlight: number;
    /** Lookups waiting for one under way to end. */
    waiting: (() => void)[];
  }
  const windows = new LRUCache<string, Window>({ max: CLIENTS_KEPT });
  const windowOf = (client: string, now: number): Window => {
    let window = windows.get(client);
    if (!window) {
      window = { startedAt: now, unknown: 0, inFlight: 0, waiting: [] };
      windows.set(client, window);
    } else if (now - window.startedAt >= WINDOW_MS) {
      window.startedAt = now;
      window.unknown = 0;
    }
    return window;
  };
  return {
    async begin(client) {
      for (;;) {
        const now = Date.now();
        const window = windowOf(client, now);
        if (window.unknown >= limit) {
          return Math.max(1, Math.ceil((window.startedAt + WINDOW_MS - now) / 1000));
        }
        if (window.unknown + window.inFlight < limit) {
          window.inFlight++;
          let ended = false;
          return (unknown) => {
            if (ended) return;
            ended = true;
            window.inFlight--;
            if (unknown) windowOf(client, Date.now()).unknown++;
            // Each waiter is judged again (the bound may now refuse them all).
            for (const wake of window.waiting.splice(0)) wake();
          };
        }
        await new Promise<void>((resolve) => window.waiting.push(resolve));
      }
    },
  };
}
