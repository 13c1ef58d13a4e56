import { randomBytes } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { createRateLimiter, type RateLimiter, type RateLimitLog } from '../src/modules/api-keys/index.ts';
import { createTestContext, type TestContext } from './helpers/app.ts';
import { setupOwner } from './helpers/auth.ts';
import { buildApiKey } from './helpers/factories.ts';
import { type OwnRedis, startOwnRedis } from './helpers/redis-server.ts';

/** A log that keeps what the limiter reported. */
function recordingLog() {
  const warnings: string[] = [];
  const infos: string[] = [];
  const log: RateLimitLog = {
    warn: (_details, message) => warnings.push(message),
    info: (_details, message) => infos.push(message),
  };
  return { log, warnings, infos };
}

const newKey = () => `key_${randomBytes(6).toString('hex')}`;

/**
 * Issue #8: a Redis outage must not lift the per-key limits. Each test runs its own redis-server on a
 * free port and kills it (SIGKILL) mid-test: the limit must keep holding.
 */
describe('API-key rate limits when Redis goes away', () => {
  let redis: OwnRedis;
  const limiters: RateLimiter[] = [];
  beforeEach(async () => {
    redis = await startOwnRedis();
  });
  afterEach(async () => {
    await Promise.all(limiters.splice(0).map((l) => l.close()));
    await redis?.close();
  });

  it('keeps counting in process, logs the outage once, and logs again only for a new outage', async () => {
    const { log, warnings, infos } = recordingLog();
    const limiter = createRateLimiter({ REDIS_URL: redis.url }, log);
    const otherProcess = createRateLimiter({ REDIS_URL: redis.url }, recordingLog().log);
    limiters.push(limiter, otherProcess);
    const key = newKey();

    // Redis holds the count: the other process sees this one's request.
    expect((await limiter.consume(key, 3)).allowed).toBe(true);
    expect(await otherProcess.consume(key, 3)).toMatchObject({ allowed: true, remaining: 1 });
    expect(warnings).toEqual([]);

    await redis.kill();
    const during: boolean[] = [];
    for (let i = 0; i < 6; i++) during.push((await limiter.consume(key, 3)).allowed);
    expect(during).toEqual([true, true, true, false, false, false]);
    // ioredis keeps trying to reconnect meanwhile (an 'error' each time): still one line.
    await sleep(1_500);
    const later = await limiter.consume(key, 3);
    expect(later).toMatchObject({ allowed: false, remaining: 0, limit: 3 });
    expect(later.resetSeconds).toBeGreaterThanOrEqual(1);
    expect(warnings).toHaveLength(1);
    expect(warnings[0]).toMatch(/Redis unavailable/);
    expect(limiter.redisOutages).toBe(1);

    // Redis comes back (empty): counting returns to it, and that is logged once.
    await redis.restart();
    await expect
      .poll(
        async () => {
          await limiter.consume(newKey(), 1_000);
          return infos.length;
        },
        { timeout: 10_000, interval: 200 },
      )
      .toBe(1);
    expect(infos[0]).toMatch(/Redis is back/);
    expect(await otherProcess.consume(key, 3)).toMatchObject({ allowed: true, remaining: 2 });

    // A second outage is a second line.
    await redis.kill();
    await limiter.consume(key, 3);
    await limiter.consume(key, 3);
    expect(warnings).toHaveLength(2);
    expect(limiter.redisOutages).toBe(2);
  });

  it('refuses requests over a key’s limit through the API while Redis is down', async () => {
    const ctx: TestContext = await createTestContext('postgres', { REDIS_URL: redis.url });
    try {
      const owner = await setupOwner(ctx.app);
      const { key } = await buildApiKey(ctx.app, owner, { rateLimit: 3 });
      const status = () =>
        ctx.app.inject({ method: 'GET', url: '/api/v1/eml_none/status', headers: { 'x-api-key': key } });
      const first = await status();
      expect(first.statusCode, first.body).toBe(404);
      expect(first.headers['ratelimit-remaining']).toBe('2');

      await redis.kill();
      const codes: number[] = [];
      for (let i = 0; i < 5; i++) codes.push((await status()).statusCode);
      expect(codes).toEqual([404, 404, 404, 429, 429]);
      expect(ctx.app.ctx.rateLimiter.redisOutages).toBe(1);
    } finally {
      await ctx.close();
    }
  });
});
