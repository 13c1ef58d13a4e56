import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { createTestContext, type TestContext } from './helpers/app.ts';
import { ORIGIN_HEADERS, randomClientIp, setupOwner, type TeamOwner } from './helpers/auth.ts';
import { expectError } from './helpers/factories.ts';

/**
 * TRUST_PROXY decides which address the sign-in rate limit (better-auth: 3 attempts per 10 s per IP)
 * counts against (issue #8): a client must not get a fresh bucket by writing its own leftmost
 * X-Forwarded-For entry, and only the configured proxies may speak for a client.
 */
describe.each([
  ['a hop count', '1'],
  ['a list of proxy addresses and CIDRs', '192.0.2.0/24,198.51.100.7'],
])('TRUST_PROXY as %s', (_label, trustProxy) => {
  let ctx: TestContext;
  let owner: TeamOwner;
  /** The proxy in front of the app (its socket address) and, for the list, a second proxy hop. */
  const proxy = trustProxy === '1' ? '127.0.0.1' : '198.51.100.7';
  const innerHops = trustProxy === '1' ? [] : ['192.0.2.10'];

  beforeAll(async () => {
    ctx = await createTestContext('postgres', { TRUST_PROXY: trustProxy });
  });
  // Every case gets a team of its own (CONVENTIONS.md); the app and database are the file's.
  beforeEach(async () => {
    owner = await setupOwner(ctx.app);
  });
  afterAll(() => ctx?.close());

  const attempt = (remoteAddress: string, forwardedFor: string[]) =>
    ctx.app.inject({
      method: 'POST',
      url: '/api/auth/sign-in/email',
      headers: { ...ORIGIN_HEADERS(ctx.app), 'x-forwarded-for': forwardedFor.join(', ') },
      remoteAddress,
      payload: { email: owner.email, password: 'wrong password' },
    });

  it('counts sign-ins against the address the proxy saw, whatever leftmost entry the client adds', async () => {
    const client = randomClientIp();
    // The client writes a new X-Forwarded-For of its own each time; the proxy appends what it saw.
    for (let i = 0; i < 3; i++) {
      const response = await attempt(proxy, [randomClientIp(), client, ...innerHops]);
      expect(response.statusCode, response.body).toBe(401);
    }
    expectError(await attempt(proxy, [randomClientIp(), client, ...innerHops]), 429, 'RATE_LIMITED');
    // The forwarded address is used at all: another client behind the same proxy has its own bucket.
    expect((await attempt(proxy, [client, randomClientIp(), ...innerHops])).statusCode).toBe(401);
  });

  it.runIf(trustProxy !== '1')(
    'ignores X-Forwarded-For from an address that is not a listed proxy',
    async () => {
      const direct = randomClientIp();
      for (let i = 0; i < 3; i++) {
        const response = await attempt(direct, [randomClientIp()]);
        expect(response.statusCode, response.body).toBe(401);
      }
      expectError(await attempt(direct, [randomClientIp()]), 429, 'RATE_LIMITED');
      // The same forwarded addresses from a listed proxy are believed: each is its own client.
      for (let i = 0; i < 4; i++) {
        expect((await attempt(proxy, [randomClientIp(), ...innerHops])).statusCode).toBe(401);
      }
    },
  );
});
