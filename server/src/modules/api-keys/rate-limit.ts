import { createRequire } from 'node:module';
import type { Redis as RedisClient } from 'ioredis';
import type * as Flexible from 'rate-limiter-flexible';
import type { Config } from '../../config.ts';

type RateLimiterAbstract = Flexible.RateLimiterAbstract;
type RateLimiterRes = Flexible.RateLimiterRes;

/**
 * rate-limiter-flexible's classes from their own files: its index loads every store (36 files,
 * `node:cluster` among them) where an idle server uses the memory store only (issue #9, idle
 * memory); the Redis store is loaded when REDIS_URL is set.
 */
const requireHere = createRequire(import.meta.url);
const RateLimiterMemory = requireHere(
  'rate-limiter-flexible/lib/RateLimiterMemory.js',
) as typeof Flexible.RateLimiterMemory;
const RateLimiterRes = requireHere(
  'rate-limiter-flexible/lib/RateLimiterRes.js',
) as typeof Flexible.RateLimiterRes;

/** Outcome of one counted request: the values behind the RateLimit-* headers. */
export interface RateLimitDecision {
  allowed: boolean;
  /** Requests allowed per window (the key's rateLimit). */
  limit: number;
  /** Requests left in the current window, ≥ 0. */
  remaining: number;
  /** Seconds until the window resets, ≥ 1 when limited. */
  resetSeconds: number;
}

/** Per-key fixed-window limiter: `limit` requests per 60 s window (spec "Limits": per minute, per key). */
export interface RateLimiter {
  consume(key: string, limit: number): Promise<RateLimitDecision>;
  /**
   * Redis outages seen since start: each time requests began to be counted in process because the
   * Redis store failed (0 without REDIS_URL). The figure for a metrics endpoint.
   */
  readonly redisOutages: number;
  close(): Promise<void>;
}

/** Where the limiter reports a Redis outage and its end (Fastify's pino logger fits). */
export interface RateLimitLog {
  warn(details: object, message: string): void;
  info(details: object, message: string): void;
}

const WINDOW_SECONDS = 60;
/**
 * The counters' own limit: they only count, the key's rateLimit decides. A refused request is
 * counted too (as rate-limiter-flexible counts a consume past its points).
 */
const COUNT_ONLY = Number.MAX_SAFE_INTEGER;
/** A Redis command slower than this counts in process instead of holding the request (ms). */
const REDIS_COMMAND_TIMEOUT_MS = 1_000;
/** Requests wait at most this long for the first connection at start-up before counting in process (ms). */
const FIRST_CONNECTION_WAIT_MS = 2_000;

/** Per-call options handed through rate-limiter-flexible to the insurance limiter, which marks them. */
interface ConsumeOptions {
  countedInProcess?: boolean;
}

/**
 * The in-process store that rate-limiter-flexible's `insuranceLimiter` option switches to when a
 * Redis command fails (or Redis is not ready). The library gives no hook for that moment, so this
 * store marks the call's options, which the library passes through unchanged.
 */
class InsuranceLimiter extends RateLimiterMemory {
  override consume(key: string | number, points = 1, options: ConsumeOptions = {}): Promise<RateLimiterRes> {
    options.countedInProcess = true;
    return super.consume(key, points, options);
  }
}

/**
 * Creates the limiter: in memory by default, in Redis when REDIS_URL is set so that every API
 * process shares one count per key (ARCHITECTURE.md "Runtime shape").
 *
 * When Redis fails (down, unreachable, slower than 1 s) each request is counted by an in-process
 * limiter with the same limit instead (rate-limiter-flexible's `insuranceLimiter`), so the limit
 * keeps holding per process; the first such request of an outage logs one warning and adds one to
 * {@link RateLimiter.redisOutages}, the first request Redis counts again logs the end (issue #8).
 */
export function createRateLimiter(config: Pick<Config, 'REDIS_URL'>, log: RateLimitLog): RateLimiter {
  // ioredis (~2 MB of heap) is loaded only when REDIS_URL is set (issue #9, idle memory).
  const redis: RedisClient | undefined = config.REDIS_URL
    ? new (requireHere('ioredis') as typeof import('ioredis')).Redis(config.REDIS_URL, {
        // Fail fast to the in-process count rather than queue requests behind a reconnect.
        enableOfflineQueue: false,
        maxRetriesPerRequest: 1,
        commandTimeout: REDIS_COMMAND_TIMEOUT_MS,
      })
    : undefined;
  let lastRedisError = 'not connected';
  // Every reconnect attempt emits 'error'; the outage is reported once, by the requests (below).
  redis?.on('error', (error: Error) => {
    lastRedisError = error.message;
  });
  // Requests arriving while the first connection is being made wait for it rather than count as an outage.
  const firstConnection = redis
    ? new Promise<void>((resolve) => {
        redis.once('ready', resolve);
        redis.once('error', resolve);
        setTimeout(resolve, FIRST_CONNECTION_WAIT_MS).unref();
      })
    : Promise.resolve();

  let inOutage = false;
  let redisOutages = 0;
  const noteStore = (countedInProcess: boolean) => {
    if (countedInProcess === inOutage) return;
    inOutage = countedInProcess;
    if (countedInProcess) {
      redisOutages++;
      log.warn(
        { reason: lastRedisError, redisOutages },
        'Redis unavailable: API-key rate limits are counted in this process until it is back',
      );
    } else {
      log.info({ redisOutages }, 'Redis is back: API-key rate limits are shared between processes again');
    }
  };

  // One limiter counts every key's requests; each key's own limit decides (below). rate-limiter-flexible
  // fixes `points` per instance, and one in-memory instance per limit value kept a count per limit:
  // a key whose rateLimit changed started again from zero, and came back to its old count when
  // changed back (review finding, session 14; Redis already kept one count per key).
  let counter: RateLimiterAbstract | undefined;
  const counterOf = (): RateLimiterAbstract => {
    if (!counter) {
      const options = { points: COUNT_ONLY, duration: WINDOW_SECONDS, keyPrefix: 'pw:rl' };
      counter = redis
        ? new (
            requireHere('rate-limiter-flexible/lib/RateLimiterRedis.js') as typeof Flexible.RateLimiterRedis
          )({
            ...options,
            storeClient: redis,
            rejectIfRedisNotReady: true,
            insuranceLimiter: new InsuranceLimiter(options),
          })
        : new RateLimiterMemory(options);
    }
    return counter;
  };

  return {
    async consume(key, limit) {
      await firstConnection;
      const options: ConsumeOptions = {};
      let counted: RateLimiterRes;
      try {
        counted = await counterOf().consume(key, 1, options);
      } catch (error) {
        // Only past COUNT_ONLY requests in a window; anything else would be a failure of the
        // in-process store itself: no fail-open.
        if (!(error instanceof RateLimiterRes)) throw error;
        counted = error;
      }
      const decision: RateLimitDecision = {
        allowed: counted.consumedPoints <= limit,
        limit,
        remaining: Math.max(0, limit - counted.consumedPoints),
        resetSeconds: Math.max(1, Math.ceil(counted.msBeforeNext / 1000)),
      };
      if (redis) noteStore(options.countedInProcess === true);
      return decision;
    },
    get redisOutages() {
      return redisOutages;
    },
    async close() {
      if (redis) await redis.quit().catch(() => redis.disconnect());
    },
  };
}
