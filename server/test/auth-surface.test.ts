import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { OPEN_AUTH_PATHS } from '../src/modules/auth/auth.mount.ts';
import { createAuth } from '../src/modules/auth/better-auth.ts';
import { maskSessionTokens } from '../src/modules/auth/session-token-output.ts';
import { createTestContext, type TestContext } from './helpers/app.ts';
import {
  cookieHeaderFrom,
  ORIGIN_HEADERS,
  randomClientIp,
  sessionHeaders,
  setupOwner,
  type TeamOwner,
} from './helpers/auth.ts';
import { expectError } from './helpers/factories.ts';

/*
 * What a session reaches of better-auth over HTTP (security review, session 12): before, every
 * endpoint of better-auth's core was open under /api/auth/*, so a script running with the session
 * cookie could list the user's sessions with their tokens (each one a working session cookie),
 * read the token of its own HttpOnly cookie from get-session, and link another identity
 * provider's account to the user (a later sign-in as them). Now session tokens stay in the cookie
 * and only the endpoints the dashboard uses are open.
 */
describe('better-auth over HTTP: session tokens and the open endpoints', () => {
  let ctx: TestContext;
  let owner: TeamOwner;
  /** The session token in `owner.cookie` (the cookie value is `<token>.<signature>`). */
  let token: string;

  beforeAll(async () => {
    ctx = await createTestContext('postgres');
    owner = await setupOwner(ctx.app);
    const value = decodeURIComponent(/session_token=([^;]+)/.exec(owner.cookie)![1]!);
    token = value.slice(0, value.indexOf('.'));
    expect(token.length).toBeGreaterThanOrEqual(32);
  });
  afterAll(async () => {
    await ctx?.close();
  });

  it('get-session and list-sessions describe the sessions without their tokens', async () => {
    // A second session of the same user (another device): its token must not show either.
    const other = await ctx.app.inject({
      method: 'POST',
      url: '/api/auth/sign-in/email',
      headers: ORIGIN_HEADERS(ctx.app),
      remoteAddress: randomClientIp(),
      payload: { email: owner.email, password: owner.password },
    });
    expect(other.statusCode).toBe(200);
    expect(other.json()).not.toHaveProperty('token');
    expect(other.json().user.email).toBe(owner.email);
    const otherCookie = cookieHeaderFrom(other);
    const otherValue = decodeURIComponent(/session_token=([^;]+)/.exec(otherCookie)![1]!);
    const otherToken = otherValue.slice(0, otherValue.indexOf('.'));

    const session = await ctx.app.inject({
      method: 'GET',
      url: '/api/auth/get-session',
      headers: sessionHeaders(ctx.app, owner),
    });
    expect(session.statusCode).toBe(200);
    expect(session.json().session.userId).toBe(owner.userId);
    expect(session.json().session).not.toHaveProperty('token');
    expect(session.body).not.toContain(token);

    const list = await ctx.app.inject({
      method: 'GET',
      url: '/api/auth/list-sessions',
      headers: sessionHeaders(ctx.app, owner),
    });
    expect(list.statusCode).toBe(200);
    expect(list.json().length).toBeGreaterThanOrEqual(2);
    for (const listed of list.json()) expect(listed).not.toHaveProperty('token');
    expect(list.body).not.toContain(token);
    expect(list.body).not.toContain(otherToken);

    // The cookie a sign-in sets still works (the rewritten answer kept its Set-Cookie).
    const withOther = await ctx.app.inject({
      method: 'GET',
      url: '/api/auth/me',
      headers: { cookie: otherCookie, ...ORIGIN_HEADERS(ctx.app) },
    });
    expect(withOther.statusCode).toBe(200);
  });

  it('change-password answers without the token of the session it starts', async () => {
    const user = await setupOwner(ctx.app);
    const changed = await ctx.app.inject({
      method: 'POST',
      url: '/api/auth/change-password',
      headers: sessionHeaders(ctx.app, user),
      payload: {
        currentPassword: user.password,
        newPassword: 'a brand new password',
        revokeOtherSessions: true,
      },
    });
    expect(changed.statusCode, changed.body).toBe(200);
    const cookie = cookieHeaderFrom(changed);
    const value = decodeURIComponent(/session_token=([^;]+)/.exec(cookie)![1]!);
    const newToken = value.slice(0, value.indexOf('.'));
    expect(newToken.length).toBeGreaterThanOrEqual(32);
    expect(changed.body).not.toContain(newToken);
    expect(changed.json()).not.toHaveProperty('token');
    const me = await ctx.app.inject({
      method: 'GET',
      url: '/api/auth/me',
      headers: { cookie, ...ORIGIN_HEADERS(ctx.app) },
    });
    expect(me.statusCode).toBe(200);
  });

  it('closes the endpoints the dashboard does not use (404 NOT_FOUND), whatever the session', async () => {
    const closed: [method: 'GET' | 'POST', path: string, payload?: object][] = [
      ['GET', '/api/auth/list-accounts'],
      ['POST', '/api/auth/get-access-token', { providerId: 'github' }],
      ['POST', '/api/auth/refresh-token', { providerId: 'github' }],
      ['GET', '/api/auth/account-info'],
      ['POST', '/api/auth/link-social', { provider: 'github' }],
      ['POST', '/api/auth/unlink-account', { providerId: 'credential' }],
      ['POST', '/api/auth/revoke-session', { token }],
      ['POST', '/api/auth/update-session', { activeOrganizationId: 'team_x' }],
      ['POST', '/api/auth/delete-user', { password: owner.password }],
      ['POST', '/api/auth/verify-password', { password: owner.password }],
      ['POST', '/api/auth/request-password-reset', { email: owner.email }],
      ['GET', '/api/auth/reset-password/abc?callbackURL=/'],
      ['POST', '/api/auth/change-email', { newEmail: 'x@example.test' }],
      ['GET', '/api/auth/organization/list'],
      ['GET', '/api/auth/no-such-endpoint'],
    ];
    for (const [method, url, payload] of closed) {
      const response = await ctx.app.inject({
        method,
        url,
        headers: sessionHeaders(ctx.app, owner),
        ...(payload ? { payload } : {}),
      });
      expect({ url, status: response.statusCode }).toEqual({ url, status: 404 });
      expectError(response, 404, 'NOT_FOUND');
    }
    // The session survived all of it (revoke-session did not run).
    const me = await ctx.app.inject({
      method: 'GET',
      url: '/api/auth/me',
      headers: sessionHeaders(ctx.app, owner),
    });
    expect(me.statusCode).toBe(200);
  });

  it('every better-auth endpoint outside the open list is closed, also those of later versions', async () => {
    // A real instance of the app's configuration, only to list its endpoints (the app's own is
    // built lazily behind a proxy).
    const auth = createAuth({
      config: ctx.app.ctx.config,
      database: ctx.app.ctx.database,
      encryptionKey: Buffer.alloc(32, 1),
    }) as unknown as { api: Record<string, { path?: string }> };
    const paths = [
      ...new Set(
        Object.values(auth.api)
          .map((endpoint) => endpoint.path)
          .filter((path): path is string => typeof path === 'string'),
      ),
    ];
    expect(paths.length).toBeGreaterThan(OPEN_AUTH_PATHS.size);
    for (const path of paths) {
      if (OPEN_AUTH_PATHS.has(path) || path === '/callback/:id') continue;
      const url = `/api/auth${path.replace(/:[A-Za-z]+/g, 'x')}`;
      for (const method of ['GET', 'POST'] as const) {
        const response = await ctx.app.inject({
          method,
          url,
          headers: sessionHeaders(ctx.app, owner),
          ...(method === 'POST' ? { payload: {} } : {}),
        });
        expect({ url, method, status: response.statusCode }).toEqual({ url, method, status: 404 });
      }
    }
  });
});

describe('cookie requests to the auth library: the Origin rule and no caching', () => {
  let ctx: TestContext;
  let owner: TeamOwner;

  beforeAll(async () => {
    ctx = await createTestContext('postgres');
    owner = await setupOwner(ctx.app);
  });
  afterAll(async () => {
    await ctx?.close();
  });

  it('refuses a state-changing POST with the session cookie and no or another Origin (403 INVALID_ORIGIN)', async () => {
    // Before: better-auth let a cookie POST without Origin but with a same-origin Referer through
    // (update-user answered 200).
    const referer = `${ORIGIN_HEADERS(ctx.app).origin}/settings`;
    for (const origin of [undefined, 'https://evil.example']) {
      const response = await ctx.app.inject({
        method: 'POST',
        url: '/api/auth/update-user',
        headers: { cookie: owner.cookie, referer, ...(origin ? { origin } : {}) },
        payload: { name: 'Mallory' },
      });
      expectError(response, 403, 'FORBIDDEN');
      expect(response.json().error.details.reason).toBe('INVALID_ORIGIN');
    }
    const allowed = await ctx.app.inject({
      method: 'POST',
      url: '/api/auth/update-user',
      headers: sessionHeaders(ctx.app, owner),
      payload: { name: 'Ada Owner' },
    });
    expect(allowed.statusCode, allowed.body).toBe(200);
  });

  it('answers API requests with Cache-Control: no-store (an adapter with its password, the session)', async () => {
    const adapter = await ctx.app.inject({
      method: 'POST',
      url: '/api/adapters',
      headers: sessionHeaders(ctx.app, owner),
      payload: {
        name: 'SMTP',
        type: 'smtp',
        config: { host: 'smtp.example.test', port: 587, username: 'u', password: 'S3CRET' },
      },
    });
    expect(adapter.statusCode, adapter.body).toBe(201);
    const one = await ctx.app.inject({
      method: 'GET',
      url: `/api/adapters/${adapter.json().data.id}`,
      headers: sessionHeaders(ctx.app, owner),
    });
    expect(one.body).toContain('S3CRET');
    expect(one.headers['cache-control']).toBe('no-store');
    const session = await ctx.app.inject({
      method: 'GET',
      url: '/api/auth/get-session',
      headers: sessionHeaders(ctx.app, owner),
    });
    expect(session.statusCode).toBe(200);
    expect(session.headers['cache-control']).toBe('no-store');
    // An error answer too.
    const missing = await ctx.app.inject({
      method: 'GET',
      url: '/api/adapters/nope',
      headers: sessionHeaders(ctx.app, owner),
    });
    expect(missing.headers['cache-control']).toBe('no-store');
  });
});

describe('maskSessionTokens', () => {
  it('drops the token of a sign-in, of get-session and of each listed session, and nothing else', () => {
    expect(maskSessionTokens({ redirect: false, token: 't', user: { id: 'u', token: 'kept' } })).toEqual({
      redirect: false,
      user: { id: 'u', token: 'kept' },
    });
    expect(maskSessionTokens({ session: { id: 's', token: 't' }, user: { id: 'u' } })).toEqual({
      session: { id: 's' },
      user: { id: 'u' },
    });
    expect(
      maskSessionTokens([
        { id: 'a', token: 'ta' },
        { id: 'b', token: 'tb' },
      ]),
    ).toEqual([{ id: 'a' }, { id: 'b' }]);
    expect(maskSessionTokens(null)).toBeNull();
  });
});
