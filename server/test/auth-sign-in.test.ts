import type { FastifyInstance } from 'fastify';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ConfigError, loadConfig } from '../src/config.ts';
import { isSameOriginPath } from '../src/modules/auth/auth.schema.ts';
import { decideSignUp, firstTeamName } from '../src/modules/auth/sign-up-policy.ts';
import { createTestContext, type TestContext } from './helpers/app.ts';
import {
  cookieHeaderFrom,
  ORIGIN_HEADERS,
  randomClientIp,
  routeProviderHostsTo,
  setupOwner,
} from './helpers/auth.ts';
import { freePort } from './helpers/ports.ts';

/**
 * Issue #3 "Sign-in": configuration of the sign-in methods, `GET /api/auth/providers`, the start
 * route's checks (redirect target, provider, rate limit), AUTH_PASSWORD=false and cookie
 * attributes. Nothing here reaches a provider: the start route only builds the authorization URL,
 * and a fetch guard refuses any real host all the same.
 */
const GITHUB = { GITHUB_CLIENT_ID: 'gh-id', GITHUB_CLIENT_SECRET: 'gh-secret' };
const GOOGLE = { GOOGLE_CLIENT_ID: 'google-id', GOOGLE_CLIENT_SECRET: 'google-secret' };

let restoreFetch: () => void;
/** A 127.0.0.1 address nothing listens on (freePort), for providers that are never contacted. */
let nowhere: string;
beforeAll(async () => {
  nowhere = `http://127.0.0.1:${await freePort()}`;
  // No fake is needed: any request to a provider host would fail loudly at `nowhere`.
  restoreFetch = routeProviderHostsTo(nowhere);
});
afterAll(() => restoreFetch?.());

function expectError(response: { statusCode: number; json: () => any }, status: number, code: string) {
  expect(response.statusCode).toBe(status);
  expect(response.json()).toMatchObject({ success: false, error: { code } });
  return response.json().error.details as Record<string, unknown>;
}

describe('sign-in configuration', () => {
  it('reads the provider variables, with OIDC_NAME defaulting to "Single sign-on"', () => {
    const config = loadConfig({
      ...GITHUB,
      OIDC_ISSUER: 'https://sso.example.com/realms/acme/',
      OIDC_CLIENT_ID: 'postwright',
      OIDC_CLIENT_SECRET: 's3cret',
    });
    expect(config).toMatchObject({
      AUTH_PASSWORD: true,
      GITHUB_CLIENT_ID: 'gh-id',
      OIDC_NAME: 'Single sign-on',
    });
    expect(loadConfig({ AUTH_PASSWORD: 'false', ...GOOGLE }).AUTH_PASSWORD).toBe(false);
  });

  it.each([
    [{ GITHUB_CLIENT_ID: 'id' }, 'Invalid GITHUB_CLIENT_SECRET: required when GITHUB_CLIENT_ID is set'],
    [
      { GITHUB_CLIENT_SECRET: 'secret' },
      'Invalid GITHUB_CLIENT_ID: required when GITHUB_CLIENT_SECRET is set',
    ],
    [{ GOOGLE_CLIENT_ID: 'id' }, 'Invalid GOOGLE_CLIENT_SECRET: required when GOOGLE_CLIENT_ID is set'],
    [
      { OIDC_ISSUER: 'https://sso.example.com', OIDC_CLIENT_ID: 'id' },
      'Invalid OIDC_CLIENT_SECRET: required when OIDC_ISSUER, OIDC_CLIENT_ID is set',
    ],
    [
      { OIDC_CLIENT_ID: 'id', OIDC_CLIENT_SECRET: 'secret' },
      'Invalid OIDC_ISSUER: required when OIDC_CLIENT_ID, OIDC_CLIENT_SECRET is set',
    ],
  ])('refuses an incomplete provider %j', (env, message) => {
    expect(() => loadConfig(env)).toThrow(new ConfigError(message));
  });

  it('refuses a plain-http issuer off loopback, and AUTH_PASSWORD=false without a provider', () => {
    const oidc = { OIDC_CLIENT_ID: 'id', OIDC_CLIENT_SECRET: 'secret' };
    expect(() => loadConfig({ ...oidc, OIDC_ISSUER: 'http://sso.example.com' })).toThrow(
      /^Invalid OIDC_ISSUER: /,
    );
    expect(loadConfig({ ...oidc, OIDC_ISSUER: 'http://127.0.0.1:8080' }).OIDC_ISSUER).toBe(
      'http://127.0.0.1:8080',
    );
    expect(() => loadConfig({ AUTH_PASSWORD: 'false' })).toThrow(/^Invalid AUTH_PASSWORD: /);
    expect(() => loadConfig({ AUTH_PASSWORD: 'no' })).toThrow(/^Invalid AUTH_PASSWORD: /);
  });
});

describe('sign-up rules', () => {
  const facts = {
    emailVerified: true,
    hasPendingInvitation: false,
    anyUserExists: true,
    setupAuthorized: false,
  };

  it.each([
    [
      { anyUserExists: false, setupAuthorized: true },
      { admitted: true, as: 'first-owner' },
    ],
    [{ anyUserExists: false }, { admitted: false, reason: 'setup_token_required' }],
    [{}, { admitted: false, reason: 'invitation_required' }],
    [{ hasPendingInvitation: true }, { admitted: true, as: 'invitee' }],
    [
      { hasPendingInvitation: true, emailVerified: false },
      { admitted: false, reason: 'email_not_verified' },
    ],
    [{ setupAuthorized: true }, { admitted: false, reason: 'invitation_required' }],
  ])('%j → %j', (overrides, decision) => {
    expect(decideSignUp({ ...facts, ...overrides })).toEqual(decision);
  });

  it('names the first team after its owner', () => {
    expect(firstTeamName({ name: 'Ada Lovelace', email: 'ada@example.test' })).toBe("Ada Lovelace's team");
    expect(firstTeamName({ name: '  ', email: 'ada@example.test' })).toBe("ada's team");
  });
});

describe('redirect targets', () => {
  it.each(['/', '/templates', '/templates/tpl_01?tab=versions#top', '/a/b/../c'])('accepts %s', (path) => {
    expect(isSameOriginPath(path)).toBe(true);
  });

  it.each([
    'https://evil.example/x',
    '//evil.example',
    '//evil.example/path',
    '/\\evil.example',
    '/\\/evil.example',
    '\\\\evil.example',
    'evil.example',
    'javascript:alert(1)',
    'http:/evil.example',
    '/x\r\nSet-Cookie: a=b',
    '/\tx',
    '',
  ])('refuses %j', (target) => {
    expect(isSameOriginPath(target)).toBe(false);
  });
});

describe('sign-in routes', () => {
  const contexts: TestContext[] = [];
  const start = async (env: Record<string, string>) => {
    const ctx = await createTestContext('postgres', env);
    contexts.push(ctx);
    return ctx.app;
  };
  // One app with GitHub enabled serves the tests that need nothing else.
  let githubApp: Promise<FastifyInstance> | undefined;
  const withGithub = () => {
    githubApp ??= start({ ...GITHUB });
    return githubApp;
  };
  afterAll(async () => {
    for (const ctx of contexts) await ctx.close();
  });

  it('lists the enabled sign-in methods at /api/auth/providers', async () => {
    const all = await start({
      ...GITHUB,
      ...GOOGLE,
      OIDC_ISSUER: nowhere,
      OIDC_CLIENT_ID: 'id',
      OIDC_CLIENT_SECRET: 'secret',
      OIDC_NAME: 'Acme SSO',
    });
    const listed = await all.inject({ method: 'GET', url: '/api/auth/providers' });
    expect(listed.statusCode).toBe(200);
    expect(listed.json()).toEqual({
      success: true,
      data: [
        { id: 'password', name: 'Email and password', type: 'password' },
        { id: 'github', name: 'GitHub', type: 'oauth' },
        { id: 'google', name: 'Google', type: 'oauth' },
        { id: 'oidc', name: 'Acme SSO', type: 'oauth' },
      ],
    });

    const passwordOnly = await start({});
    expect((await passwordOnly.inject({ method: 'GET', url: '/api/auth/providers' })).json().data).toEqual([
      { id: 'password', name: 'Email and password', type: 'password' },
    ]);
  });

  it('redirects to the provider with state and PKCE, setting a state cookie', async () => {
    const app = await withGithub();
    const response = await app.inject({
      method: 'GET',
      url: '/api/auth/sign-in/github?redirectTo=/templates',
      remoteAddress: randomClientIp(),
    });
    expect(response.statusCode).toBe(302);
    const location = new URL(String(response.headers.location));
    expect(`${location.origin}${location.pathname}`).toBe('https://github.com/login/oauth/authorize');
    expect(Object.fromEntries(location.searchParams)).toMatchObject({
      client_id: 'gh-id',
      redirect_uri: `${app.ctx.config.BASE_URL}/api/auth/callback/github`,
      code_challenge_method: 'S256',
      state: expect.any(String),
      code_challenge: expect.any(String),
    });
    expect(response.headers['cache-control']).toBe('no-store');
    const stateCookie = response.cookies.find((c) => c.name === 'postwright.state');
    expect(stateCookie).toMatchObject({ httpOnly: true, sameSite: 'Lax', path: '/' });
    expect(stateCookie?.secure).toBeFalsy();
  });

  it('refuses a foreign or absolute redirectTo with 400 before redirecting anywhere', async () => {
    const app = await withGithub();
    for (const target of ['https://evil.example/x', '//evil.example', '/\\evil.example', 'evil', '/\r\nx']) {
      const response = await app.inject({
        method: 'GET',
        url: `/api/auth/sign-in/github?redirectTo=${encodeURIComponent(target)}`,
        remoteAddress: randomClientIp(),
      });
      const details = expectError(response, 400, 'VALIDATION_ERROR');
      expect(details.issues).toEqual([expect.objectContaining({ path: 'querystring.redirectTo' })]);
      expect(response.headers.location).toBeUndefined();
      expect(response.headers['set-cookie']).toBeUndefined();
    }
  });

  it("answers 404 for an unknown or disabled provider, and closes better-auth's own start route", async () => {
    const app = await withGithub();
    for (const provider of ['google', 'oidc', 'password', 'social', 'gitlab']) {
      const response = await app.inject({
        method: 'GET',
        url: `/api/auth/sign-in/${provider}`,
        remoteAddress: randomClientIp(),
      });
      expectError(response, 404, 'NOT_FOUND');
      expect(response.headers.location).toBeUndefined();
    }
    for (const url of ['/api/auth/sign-in/social', '/api/auth/sign-in/social/']) {
      const direct = await app.inject({
        method: 'POST',
        url,
        headers: ORIGIN_HEADERS(app),
        remoteAddress: randomClientIp(),
        payload: { provider: 'github', callbackURL: '/' },
      });
      expectError(direct, 404, 'NOT_FOUND');
    }
  });

  it('rate-limits sign-in starts per client IP with 429 RATE_LIMITED', async () => {
    const app = await withGithub();
    const attempt = (remoteAddress: string) =>
      app.inject({ method: 'GET', url: '/api/auth/sign-in/github', remoteAddress });
    const client = randomClientIp();
    for (let i = 0; i < 10; i++) expect((await attempt(client)).statusCode).toBe(302);
    const limited = await attempt(client);
    const details = expectError(limited, 429, 'RATE_LIMITED');
    expect(details.retryAfter).toBeGreaterThan(0);
    expect(Number(limited.headers['retry-after'])).toBeGreaterThan(0);
    expect((await attempt(randomClientIp())).statusCode).toBe(302);
  });

  it('turns email and password off with AUTH_PASSWORD=false', async () => {
    const app = await start({ AUTH_PASSWORD: 'false', ...GOOGLE });
    expect((await app.inject({ method: 'GET', url: '/api/auth/providers' })).json().data).toEqual([
      { id: 'google', name: 'Google', type: 'oauth' },
    ]);
    const setup = await app.inject({
      method: 'POST',
      url: '/api/auth/setup',
      headers: ORIGIN_HEADERS(app),
      payload: {
        token: app.ctx.config.SETUP_TOKEN,
        name: 'Ada',
        email: 'ada@example.test',
        password: 'a long password',
        teamName: 'Acme',
      },
    });
    expect(expectError(setup, 403, 'FORBIDDEN')).toEqual({ reason: 'PASSWORD_SIGN_IN_DISABLED' });
    const signIn = await app.inject({
      method: 'POST',
      url: '/api/auth/sign-in/email',
      headers: ORIGIN_HEADERS(app),
      remoteAddress: randomClientIp(),
      payload: { email: 'ada@example.test', password: 'a long password' },
    });
    expectError(signIn, 404, 'NOT_FOUND');
    expect(signIn.headers['set-cookie']).toBeUndefined();
  });

  it('marks cookies Secure (and __Secure-) when BASE_URL is https', async () => {
    const app = await start({ BASE_URL: 'https://mail.example.test', ...GITHUB });
    const owner = await setupOwner(app);
    expect(owner.cookie).toMatch(/^__Secure-postwright\.session_token=/);
    const started = await app.inject({
      method: 'GET',
      url: '/api/auth/sign-in/github',
      remoteAddress: randomClientIp(),
    });
    expect(started.statusCode).toBe(302);
    const signedIn = await app.inject({
      method: 'POST',
      url: '/api/auth/sign-in/email',
      headers: ORIGIN_HEADERS(app),
      remoteAddress: randomClientIp(),
      payload: { email: owner.email, password: owner.password },
    });
    expect(cookieHeaderFrom(signedIn)).toMatch(/^__Secure-postwright\.session_token=/);
    for (const cookie of [...signedIn.cookies, ...started.cookies]) {
      expect(cookie).toMatchObject({ secure: true, httpOnly: true, sameSite: 'Lax', path: '/' });
    }
  });
});
