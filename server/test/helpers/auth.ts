import { createHash, createSign, generateKeyPairSync, randomBytes, randomInt } from 'node:crypto';
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { FastifyInstance, LightMyRequestResponse } from 'fastify';
import { OAuth2Server } from 'oauth2-mock-server';
import type { TeamRole } from '../../src/http/permissions.ts';
import { insertMember, insertTeam, insertUserWithPassword } from '../../src/modules/auth/auth.repository.ts';
import { resolveSetupToken } from '../../src/modules/auth/index.ts';
import { slugify } from '../../src/slug.ts';

/** A signed-in user of a test: the `cookie` header value and who they are. */
export interface SignedInUser {
  cookie: string;
  userId: string;
  email: string;
  password: string;
}

export interface TeamOwner extends SignedInUser {
  teamId: string;
}

/** `{origin}` = the origin of BASE_URL: what the dashboard's browser sends (requireSession's CSRF check). */
export function ORIGIN_HEADERS(app: FastifyInstance): { origin: string } {
  return { origin: new URL(app.ctx.config.BASE_URL).origin };
}

/** Headers of a dashboard request by `user`: their cookie plus our Origin. */
export function sessionHeaders(
  app: FastifyInstance,
  user: { cookie: string },
): { cookie: string; origin: string } {
  return { cookie: user.cookie, ...ORIGIN_HEADERS(app) };
}

/**
 * A random client address: better-auth's rate limiter allows 3 sign-ins per 10 s per IP and its
 * memory store is shared by every app in the process, so each helper sign-in uses its own IP.
 */
export function randomClientIp(): string {
  return `10.${randomInt(256)}.${randomInt(256)}.${randomInt(1, 255)}`;
}

/** The `cookie` request header carrying the cookies a response set (cleared ones left out). */
export function cookieHeaderFrom(response: LightMyRequestResponse): string {
  return response.cookies
    .filter((c) => c.value !== '' && c.maxAge !== 0)
    .map((c) => `${c.name}=${c.value}`)
    .join('; ');
}

function uniqueEmail(label: string): string {
  return `${label}-${randomBytes(5).toString('hex')}@example.test`;
}

/**
 * Signs `email` in through better-auth's `POST /api/auth/sign-in/email` (from a fresh client IP)
 * and returns the cookie header value. Throws when sign-in fails.
 */
export async function signIn(app: FastifyInstance, email: string, password: string): Promise<string> {
  const response = await app.inject({
    method: 'POST',
    url: '/api/auth/sign-in/email',
    headers: ORIGIN_HEADERS(app),
    remoteAddress: randomClientIp(),
    payload: { email, password },
  });
  if (response.statusCode !== 200) throw new Error(`sign-in failed: ${response.statusCode} ${response.body}`);
  return cookieHeaderFrom(response);
}

/**
 * An owner of a new team, signed in. On a fresh database this goes through the first-run
 * `POST /api/auth/setup`; once setup is done (tests sharing one database) it creates another
 * user, team and owner membership directly and signs in, so every test can have its own team.
 */
export async function setupOwner(
  app: FastifyInstance,
  overrides: Partial<{ name: string; email: string; password: string; teamName: string }> = {},
): Promise<TeamOwner> {
  const name = overrides.name ?? 'Test Owner';
  const email = overrides.email ?? uniqueEmail('owner');
  const password = overrides.password ?? `pw-${randomBytes(8).toString('hex')}`;
  const teamName = overrides.teamName ?? `Team ${randomBytes(3).toString('hex')}`;

  const status = await app.inject({ method: 'GET', url: '/api/auth/setup' });
  if (status.json().data.required) {
    const response = await app.inject({
      method: 'POST',
      url: '/api/auth/setup',
      headers: ORIGIN_HEADERS(app),
      remoteAddress: randomClientIp(),
      payload: { token: resolveSetupToken(app.ctx.config), name, email, password, teamName },
    });
    // A concurrent test may have completed setup in between: fall through to a direct owner.
    if (response.statusCode === 201) {
      const { user, team } = response.json().data;
      return {
        cookie: cookieHeaderFrom(response),
        userId: user.id,
        teamId: team.id,
        email: user.email,
        password,
      };
    }
    if (response.statusCode !== 409) throw new Error(`setup failed: ${response.statusCode} ${response.body}`);
  }

  const passwordHash = await (await app.ctx.auth.$context).password.hash(password);
  const { userId, teamId } = await app.ctx.database.db.transaction(async (tx) => {
    const user = await insertUserWithPassword(tx, { name, email: email.toLowerCase(), passwordHash });
    const team = await insertTeam(tx, {
      name: teamName,
      slug: `${slugify(teamName, 'team', 48)}-${randomBytes(3).toString('hex')}`,
    });
    await insertMember(tx, { teamId: team.id, userId: user.id, role: 'owner' });
    return { userId: user.id, teamId: team.id };
  });
  return { cookie: await signIn(app, email, password), userId, teamId, email: email.toLowerCase(), password };
}

/**
 * A new user with a password and `role` in the owner's team, signed in through
 * `POST /api/auth/sign-in/email`.
 */
export async function addTeamMember(
  app: FastifyInstance,
  owner: { teamId: string },
  role: TeamRole,
  overrides: Partial<{ name: string; email: string; password: string }> = {},
): Promise<SignedInUser> {
  const email = (overrides.email ?? uniqueEmail(role)).toLowerCase();
  const password = overrides.password ?? `pw-${randomBytes(8).toString('hex')}`;
  const passwordHash = await (await app.ctx.auth.$context).password.hash(password);
  const userId = await app.ctx.database.db.transaction(async (tx) => {
    const user = await insertUserWithPassword(tx, {
      name: overrides.name ?? `Test ${role}`,
      email,
      passwordHash,
    });
    await insertMember(tx, { teamId: owner.teamId, userId: user.id, role });
    return user.id;
  });
  return { cookie: await signIn(app, email, password), userId, email, password };
}

// ---------------------------------------------------------------------------------------------
// OAuth / OpenID Connect sign-in (issue #3): local identity providers and a browser-like client.
// ---------------------------------------------------------------------------------------------

/** Who signs in at a fake identity provider. */
export interface ProviderIdentity {
  /** The provider's stable subject (GitHub numeric id, Google/OIDC `sub`). */
  subject: string;
  email: string;
  emailVerified: boolean;
  name: string;
}

/** A fresh identity with a unique email (override any field). */
export function newIdentity(overrides: Partial<ProviderIdentity> = {}): ProviderIdentity {
  const tag = randomBytes(5).toString('hex');
  return {
    subject: String(randomInt(1_000_000, 2_000_000_000)),
    email: `person-${tag}@example.test`,
    emailVerified: true,
    name: `Person ${tag}`,
    ...overrides,
  };
}

/** The hosts whose endpoints better-auth's GitHub and Google providers have hard-coded. */
export const SOCIAL_PROVIDER_HOSTS = [
  'github.com',
  'api.github.com',
  'accounts.google.com',
  'oauth2.googleapis.com',
  'www.googleapis.com',
  'openidconnect.googleapis.com',
] as const;

const LOOPBACK_HOSTS = new Set(['127.0.0.1', 'localhost', '[::1]']);

/**
 * Wraps `globalThis.fetch` (better-auth looks it up on every call) so that requests to
 * {@link SOCIAL_PROVIDER_HOSTS} go to `fakeBaseUrl/<host>/<path>` instead, loopback requests pass
 * unchanged, and any other host throws: a test never contacts a real service. Returns the restore.
 */
export function routeProviderHostsTo(fakeBaseUrl: string): () => void {
  const original = globalThis.fetch;
  const hosts = new Set<string>(SOCIAL_PROVIDER_HOSTS);
  globalThis.fetch = (async (input: string | URL | Request, init?: RequestInit) => {
    const url = new URL(input instanceof Request ? input.url : String(input));
    if (LOOPBACK_HOSTS.has(url.hostname)) return original(input, init);
    if (!hosts.has(url.hostname)) throw new Error(`test refused to fetch a real host: ${url.origin}`);
    const target = `${fakeBaseUrl}/${url.hostname}${url.pathname}${url.search}`;
    return original(input instanceof Request ? new Request(target, input) : target, init);
  }) as typeof fetch;
  return () => {
    globalThis.fetch = original;
  };
}

interface PendingCode {
  identity: ProviderIdentity;
  redirectUri: string;
  codeChallenge: string | null;
  clientId: string;
}

function base64url(value: Buffer | string): string {
  return Buffer.from(value).toString('base64url');
}

function readBody(request: IncomingMessage): Promise<string> {
  return new Promise((resolve, reject) => {
    let body = '';
    request.setEncoding('utf8');
    request.on('data', (chunk: string) => {
      body += chunk;
    });
    request.on('end', () => resolve(body));
    request.on('error', reject);
  });
}

/** Client credentials of a token request: HTTP Basic (RFC 6749 §2.3.1) or the form body. */
function clientCredentials(request: IncomingMessage, form: URLSearchParams): { id: string; secret: string } {
  const basic = request.headers.authorization?.match(/^Basic (.+)$/i)?.[1];
  if (basic) {
    const [id = '', secret = ''] = Buffer.from(basic, 'base64').toString('utf8').split(':');
    return { id: decodeURIComponent(id), secret: decodeURIComponent(secret) };
  }
  return { id: form.get('client_id') ?? '', secret: form.get('client_secret') ?? '' };
}

/** The fake GitHub and Google, running on one local port ({@link startSocialProviderFakes}). */
export interface SocialProviderFakes {
  /** `http://127.0.0.1:<port>`: pass to {@link routeProviderHostsTo}. */
  url: string;
  /** The identity the next authorization at `provider` signs in as. */
  nextIdentity(provider: 'github' | 'google', identity: ProviderIdentity): void;
  /** Token requests that were refused (wrong client, code, redirect URI or PKCE verifier). */
  refusedTokenRequests: string[];
  close(): Promise<void>;
}

/**
 * Starts local fakes of the GitHub and Google endpoints better-auth calls, in their documented
 * formats: GitHub `GET /login/oauth/authorize`, `POST /login/oauth/access_token`, `GET /user`,
 * `GET /user/emails` (docs.github.com "Authorizing OAuth apps", REST "Users" and "Emails");
 * Google `GET /o/oauth2/v2/auth`, `POST /token` returning an RS256 `id_token`, the JWKS at
 * `/oauth2/v3/certs` and `/v1/userinfo` (developers.google.com "OpenID Connect"). The authorize
 * endpoints approve at once and redirect back with `code` and `state`; the token endpoints check
 * the client credentials, the code, the redirect URI and the PKCE S256 verifier (RFC 7636 §4.6).
 */
export async function startSocialProviderFakes(clients: {
  github: { clientId: string; clientSecret: string };
  google: { clientId: string; clientSecret: string };
}): Promise<SocialProviderFakes> {
  const next: Record<'github' | 'google', ProviderIdentity | null> = { github: null, google: null };
  const codes = new Map<string, PendingCode & { provider: 'github' | 'google' }>();
  const accessTokens = new Map<string, ProviderIdentity>();
  const refused: string[] = [];
  const { privateKey, publicKey } = generateKeyPairSync('rsa', { modulusLength: 2048 });
  const kid = randomBytes(8).toString('hex');
  const googleJwk = { ...publicKey.export({ format: 'jwk' }), kid, alg: 'RS256', use: 'sig' };

  const signGoogleIdToken = (claims: Record<string, unknown>): string => {
    const header = base64url(JSON.stringify({ alg: 'RS256', typ: 'JWT', kid }));
    const payload = base64url(JSON.stringify(claims));
    const signature = createSign('RSA-SHA256').update(`${header}.${payload}`).sign(privateKey);
    return `${header}.${payload}.${base64url(signature)}`;
  };

  const authorize = (provider: 'github' | 'google', query: URLSearchParams, response: ServerResponse) => {
    const identity = next[provider] ?? newIdentity();
    next[provider] = null;
    const code = randomBytes(12).toString('hex');
    const redirectUri = query.get('redirect_uri') ?? '';
    codes.set(code, {
      provider,
      identity,
      redirectUri,
      codeChallenge: query.get('code_challenge'),
      clientId: query.get('client_id') ?? '',
    });
    const back = new URL(redirectUri);
    back.searchParams.set('code', code);
    const state = query.get('state');
    if (state) back.searchParams.set('state', state);
    response.writeHead(302, { location: back.toString() }).end();
  };

  const redeem = (provider: 'github' | 'google', request: IncomingMessage, form: URLSearchParams) => {
    const client = clientCredentials(request, form);
    const expected = clients[provider];
    const code = form.get('code') ?? '';
    const pending = codes.get(code);
    codes.delete(code);
    const verifier = form.get('code_verifier') ?? '';
    const challenge = createHash('sha256').update(verifier).digest('base64url');
    const problem =
      client.id !== expected.clientId || client.secret !== expected.clientSecret
        ? 'client'
        : !pending || pending.provider !== provider || pending.clientId !== client.id
          ? 'code'
          : pending.redirectUri !== form.get('redirect_uri')
            ? 'redirect_uri'
            : !pending.codeChallenge || pending.codeChallenge !== challenge
              ? 'pkce'
              : null;
    if (problem || !pending) {
      refused.push(`${provider}: ${problem}`);
      return null;
    }
    return pending.identity;
  };

  const json = (response: ServerResponse, status: number, body: unknown) =>
    response.writeHead(status, { 'content-type': 'application/json' }).end(JSON.stringify(body));

  const bearer = (request: IncomingMessage) =>
    accessTokens.get(request.headers.authorization?.replace(/^Bearer /i, '') ?? '');

  const server = createServer(async (request, response) => {
    const url = new URL(request.url ?? '/', 'http://fake.invalid');
    const route = `${request.method} ${url.pathname}`;
    const form = new URLSearchParams(request.method === 'POST' ? await readBody(request) : '');
    switch (route) {
      case 'GET /github.com/login/oauth/authorize':
        return authorize('github', url.searchParams, response);
      case 'POST /github.com/login/oauth/access_token': {
        const identity = redeem('github', request, form);
        // GitHub answers a bad code with 200 and an `error` field.
        if (!identity) return json(response, 200, { error: 'bad_verification_code' });
        const token = `gho_${randomBytes(16).toString('hex')}`;
        accessTokens.set(token, identity);
        return json(response, 200, {
          access_token: token,
          token_type: 'bearer',
          scope: 'read:user,user:email',
        });
      }
      case 'GET /api.github.com/user': {
        const identity = bearer(request);
        if (!identity) return json(response, 401, { message: 'Bad credentials' });
        return json(response, 200, {
          id: Number(identity.subject),
          login: identity.name.toLowerCase().replace(/\W+/g, '-'),
          name: identity.name,
          email: null, // no public email: better-auth takes the primary one from /user/emails
          avatar_url: `https://avatars.example.test/${identity.subject}`,
        });
      }
      case 'GET /api.github.com/user/emails': {
        const identity = bearer(request);
        if (!identity) return json(response, 401, { message: 'Bad credentials' });
        return json(response, 200, [
          { email: identity.email, primary: true, verified: identity.emailVerified, visibility: 'private' },
        ]);
      }
      case 'GET /accounts.google.com/o/oauth2/v2/auth':
        return authorize('google', url.searchParams, response);
      case 'POST /oauth2.googleapis.com/token': {
        const identity = redeem('google', request, form);
        if (!identity) return json(response, 400, { error: 'invalid_grant' });
        const token = `ya29.${randomBytes(16).toString('hex')}`;
        accessTokens.set(token, identity);
        const now = Math.floor(Date.now() / 1000);
        const idToken = signGoogleIdToken({
          iss: 'https://accounts.google.com',
          aud: clients.google.clientId,
          azp: clients.google.clientId,
          sub: identity.subject,
          email: identity.email,
          email_verified: identity.emailVerified,
          name: identity.name,
          iat: now,
          exp: now + 3600,
        });
        return json(response, 200, {
          access_token: token,
          expires_in: 3599,
          id_token: idToken,
          scope: 'openid email profile',
          token_type: 'Bearer',
        });
      }
      case 'GET /www.googleapis.com/oauth2/v3/certs':
        return json(response, 200, { keys: [googleJwk] });
      case 'GET /openidconnect.googleapis.com/v1/userinfo': {
        const identity = bearer(request);
        if (!identity) return json(response, 401, { error: 'invalid_token' });
        return json(response, 200, {
          sub: identity.subject,
          email: identity.email,
          email_verified: identity.emailVerified,
          name: identity.name,
        });
      }
      default:
        return json(response, 404, { message: `fake provider has no ${route}` });
    }
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    nextIdentity(provider, identity) {
      next[provider] = identity;
    },
    refusedTokenRequests: refused,
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}

/** A real OpenID Connect provider for tests (oauth2-mock-server), see {@link startOidcProvider}. */
export interface OidcProvider {
  /** `http://127.0.0.1:<port>`: the value for OIDC_ISSUER. */
  issuer: string;
  /** The OIDC_* variables that point Postwright at this provider (client id and secret included). */
  env: { OIDC_ISSUER: string; OIDC_CLIENT_ID: string; OIDC_CLIENT_SECRET: string };
  /** The identity the next authorization signs in as (its claims go into the ID token). */
  nextIdentity(identity: ProviderIdentity): void;
  close(): Promise<void>;
}

/**
 * Starts oauth2-mock-server on 127.0.0.1 with an RS256 key: discovery, JWKS, an authorize endpoint
 * that approves at once (keeping `state`, the PKCE challenge and the `nonce`), and a token
 * endpoint that checks the PKCE verifier and signs an ID token with `aud` = the client id and the
 * nonce. Each code gets the identity queued before its authorization (`sub`, `email`,
 * `email_verified`, `name`).
 */
export async function startOidcProvider(): Promise<OidcProvider> {
  const server = new OAuth2Server();
  await server.issuer.keys.generate('RS256');
  let next: ProviderIdentity | null = null;
  const byCode = new Map<string, ProviderIdentity>();
  server.service.on('beforeAuthorizeRedirect', (redirect: { url: URL }) => {
    const code = redirect.url.searchParams.get('code');
    if (code) byCode.set(code, next ?? newIdentity());
    next = null;
  });
  const claimsOf = (identity: ProviderIdentity) => ({
    sub: identity.subject,
    email: identity.email,
    email_verified: identity.emailVerified,
    name: identity.name,
  });
  server.service.on(
    'beforeTokenSigning',
    (token: { payload: Record<string, unknown> }, request: { body?: Record<string, unknown> }) => {
      const identity = byCode.get(String(request.body?.code ?? ''));
      if (identity) Object.assign(token.payload, claimsOf(identity));
    },
  );
  await server.start(0, '127.0.0.1');
  const issuer = server.issuer.url;
  if (!issuer) throw new Error('oauth2-mock-server has no issuer URL');
  return {
    issuer,
    env: { OIDC_ISSUER: issuer, OIDC_CLIENT_ID: 'postwright-test', OIDC_CLIENT_SECRET: 'oidc-secret' },
    nextIdentity(identity) {
      next = identity;
    },
    close: () => server.stop(),
  };
}

export { freePort } from './ports.ts';

/** Cookies kept between the redirects of one sign-in, as a browser would. */
export class CookieJar {
  readonly #cookies = new Map<string, string>();

  /** Takes the `Set-Cookie` headers of `response` (an empty value or `Max-Age=0` removes). */
  store(response: Response): void {
    for (const line of response.headers.getSetCookie()) {
      const [pair = ''] = line.split(';');
      const at = pair.indexOf('=');
      const name = pair.slice(0, at).trim();
      const value = pair.slice(at + 1).trim();
      if (!value || /;\s*max-age=0/i.test(line)) this.#cookies.delete(name);
      else this.#cookies.set(name, value);
    }
  }

  /** The `cookie` request header. */
  header(): string {
    return [...this.#cookies].map(([name, value]) => `${name}=${value}`).join('; ');
  }
}

/** What happened at each step of {@link signInWithProvider}. */
export interface ProviderSignIn {
  /** The answer of `GET /api/auth/sign-in/:provider`. */
  start: Response;
  /** The provider's authorization URL (the start's Location), when the start redirected. */
  authorizeUrl?: URL;
  /** The answer of our callback, when the provider redirected back. */
  callback?: Response;
  /** Where the callback redirected: `redirectTo`, or the sign-in page with `?error=`. */
  location?: string | null;
  /** The `cookie` header after the callback (the session cookie on success). */
  cookie: string;
}

/**
 * Signs in at the app on `appUrl` through `provider` the way a browser does, following each 302
 * by hand with fetch: `GET /api/auth/sign-in/:provider` (keeps the state cookie) → the provider's
 * authorization URL (the fakes and oauth2-mock-server approve at once) → our callback with
 * `code` and `state` → the callback's redirect. Every request carries `X-Forwarded-For: clientIp`
 * (apps under test run with TRUST_PROXY=1: one proxy hop), so each sign-in has its own rate-limit bucket.
 */
export async function signInWithProvider(
  appUrl: string,
  provider: string,
  options: { redirectTo?: string; setupToken?: string; clientIp?: string; accept?: string } = {},
): Promise<ProviderSignIn> {
  const jar = new CookieJar();
  const clientIp = options.clientIp ?? randomClientIp();
  const start = new URL(`/api/auth/sign-in/${provider}`, appUrl);
  if (options.redirectTo !== undefined) start.searchParams.set('redirectTo', options.redirectTo);
  if (options.setupToken !== undefined) start.searchParams.set('setupToken', options.setupToken);
  const started = await fetch(start, { redirect: 'manual', headers: { 'x-forwarded-for': clientIp } });
  jar.store(started);
  const authorize = started.status === 302 ? started.headers.get('location') : null;
  if (!authorize) return { start: started, cookie: jar.header() };

  const authorizeUrl = new URL(authorize);
  const approved = await fetch(authorizeUrl, { redirect: 'manual' });
  const callbackUrl = approved.headers.get('location');
  if (approved.status !== 302 || !callbackUrl) {
    throw new Error(`provider did not redirect back: ${approved.status} ${await approved.text()}`);
  }
  const callback = await fetch(callbackUrl, {
    redirect: 'manual',
    headers: {
      cookie: jar.header(),
      'x-forwarded-for': clientIp,
      accept: options.accept ?? 'text/html,application/xhtml+xml',
    },
  });
  jar.store(callback);
  return {
    start: started,
    authorizeUrl,
    callback,
    location: callback.headers.get('location'),
    cookie: jar.header(),
  };
}
