import { Redis } from 'ioredis';
import {
  type RateLimiterAbstract,
  RateLimiterMemory,
  RateLimiterRedis,
  RateLimiterRes,
} from 'rate-limiter-flexible';
import type { Config } from '../../config.ts';

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
  close(): Promise<void>;
}

const WINDOW_SECONDS = 60;

/**
 * Creates the limiter: in memory by default, in Redis when REDIS_URL is set so that every API
 * process shares one count per key (ARCHITECTURE.md "Runtime shape").
 * A Redis outage fails open for that request (logged by ioredis) rather than refusing all sends.
 */
export function createRateLimiter(config: Pick<Config, 'REDIS_URL'>): RateLimiter {
  const redis = config.REDIS_URL
    ? new Redis(config.REDIS_URL, { maxRetriesPerRequest: 1, enableOfflineQueue: true, lazyConnect: false })
    : undefined;
  redis?.on('error', () => {});
  // rate-limiter-flexible fixes `points` per instance; keys with the same limit share one instance.
  const limiters = new Map<number, RateLimiterAbstract>();
  const limiterFor = (limit: number): RateLimiterAbstract => {
    let limiter = limiters.get(limit);
    if (!limiter) {
      limiter = redis
        ? new RateLimiterRedis({
            storeClient: redis,
            points: limit,
            duration: WINDOW_SECONDS,
            keyPrefix: 'pw:rl',
          })
        : new RateLimiterMemory({ points: limit, duration: WINDOW_SECONDS, keyPrefix: 'pw:rl' });
      limiters.set(limit, limiter);
    }
    return limiter;
  };

  return {
    async consume(key, limit) {
      const toDecision = (res: RateLimiterRes, allowed: boolean): RateLimitDecision => ({
        allowed,
        limit,
        remaining: Math.max(0, res.remainingPoints),
        resetSeconds: Math.max(1, Math.ceil(res.msBeforeNext / 1000)),
      });
      try {
        return toDecision(await limiterFor(limit).consume(key), true);
      } catch (error) {
        if (error instanceof RateLimiterRes) return toDecision(error, false);
        return { allowed: true, limit, remaining: limit, resetSeconds: WINDOW_SECONDS };
      }
    },
    async close() {
      if (redis) await redis.quit().catch(() => redis.disconnect());
    },
  };
}
