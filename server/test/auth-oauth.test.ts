import { and, count, eq } from 'drizzle-orm';
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { accounts, invitations, members, users } from '../src/db/schema/index.ts';
import { newId } from '../src/ids.ts';
import { createTestContext, type TestContext } from './helpers/app.ts';
import {
  addTeamMember,
  CookieJar,
  freePort,
  newIdentity,
  type OidcProvider,
  randomClientIp,
  routeProviderHostsTo,
  type SocialProviderFakes,
  setupOwner,
  signInWithProvider,
  startOidcProvider,
  startSocialProviderFakes,
  type TeamOwner,
} from './helpers/auth.ts';
import type { DatabaseKind } from './helpers/database.ts';

const SETUP_TOKEN = 'test-setup-token-0123456789'; // createTestContext's
const CLIENTS = {
  github: { clientId: 'gh-client-id', clientSecret: 'gh-client-secret' },
  google: { clientId: 'google-client-id.apps.googleusercontent.test', clientSecret: 'google-secret' },
};

/*
 * Issue #3 "Sign-in", end to end over HTTP: each app listens on a real port with GitHub, Google and
 * OpenID Connect enabled; OIDC runs against oauth2-mock-server, GitHub and Google against local
 * fakes of their endpoints (reached through a fetch wrapper, never the real hosts). Each sign-in
 * follows the 302s by hand like a browser: start → authorize → callback → session cookie.
 */
let fakes: SocialProviderFakes;
let oidc: OidcProvider;
let restoreFetch: () => void;

beforeAll(async () => {
  fakes = await startSocialProviderFakes(CLIENTS);
  restoreFetch = routeProviderHostsTo(fakes.url);
  oidc = await startOidcProvider();
});

afterAll(async () => {
  await oidc?.close();
  await fakes?.close();
  restoreFetch?.();
});

// Every token request better-auth made carried the right client, code, redirect URI and PKCE verifier.
afterEach(() => {
  expect(fakes.refusedTokenRequests).toEqual([]);
});

interface OAuthApp {
  ctx: TestContext;
  url: string;
  close(): Promise<void>;
}

/** The real app on a fresh database, listening on 127.0.0.1 with all three providers enabled. */
async function startOAuthApp(kind: DatabaseKind): Promise<OAuthApp> {
  const port = await freePort();
  const url = `http://127.0.0.1:${port}`;
  const ctx = await createTestContext(kind, {
    BASE_URL: url,
    TRUST_PROXY: '1',
    GITHUB_CLIENT_ID: CLIENTS.github.clientId,
    GITHUB_CLIENT_SECRET: CLIENTS.github.clientSecret,
    GOOGLE_CLIENT_ID: CLIENTS.google.clientId,
    GOOGLE_CLIENT_SECRET: CLIENTS.google.clientSecret,
    ...oidc.env,
    OIDC_NAME: 'Acme SSO',
  });
  await ctx.app.listen({ port, host: '127.0.0.1' });
  return { ctx, url, close: () => ctx.close() };
}

function queries(app: OAuthApp) {
  const db = app.ctx.app.ctx.database.db;
  return {
    userCount: async () => (await db.select({ n: count() }).from(users))[0]!.n,
    userByEmail: async (email: string) => (await db.select().from(users).where(eq(users.email, email)))[0],
    providersOf: async (userId: string) =>
      (await db.select({ providerId: accounts.providerId }).from(accounts).where(eq(accounts.userId, userId)))
        .map((a) => a.providerId)
        .sort(),
    owners: () => db.select({ userId: members.userId }).from(members).where(eq(members.role, 'owner')),
  };
}

const me = (app: OAuthApp, cookie: string) => fetch(`${app.url}/api/auth/me`, { headers: { cookie } });
const loginError = (app: OAuthApp, reason: string) =>
  new RegExp(`^${app.url.replaceAll('.', '\\.')}/login\\?error=${reason}(&|$)`);

describe.each(['postgres'] as const)('first-run setup through a provider on %s', (kind) => {
  it('refuses a first sign-in without the setup token, creating no user', async () => {
    const app = await startOAuthApp(kind);
    try {
      const wrongToken = await signInWithProvider(app.url, 'oidc', { setupToken: 'not-the-setup-token' });
      expect(wrongToken.start.status).toBe(401);
      expect((await wrongToken.start.json()).error.code).toBe('INVALID_TOKEN');

      oidc.nextIdentity(newIdentity());
      const flow = await signInWithProvider(app.url, 'oidc', { redirectTo: '/templates' });
      expect(flow.callback?.status).toBe(302);
      expect(flow.location).toMatch(loginError(app, 'setup_token_required'));
      expect(flow.cookie).not.toContain('session_token');
      expect(await queries(app).userCount()).toBe(0);
    } finally {
      await app.close();
    }
  });

  it('makes the first OIDC user owner of a new team (authorization code, PKCE, nonce)', async () => {
    const app = await startOAuthApp(kind);
    try {
      const identity = newIdentity({ name: 'Olivia Owner' });
      oidc.nextIdentity(identity);
      const flow = await signInWithProvider(app.url, 'oidc', {
        redirectTo: '/templates?tab=all',
        setupToken: SETUP_TOKEN,
      });

      expect(flow.start.status).toBe(302);
      const authorize = flow.authorizeUrl!;
      expect(`${authorize.origin}${authorize.pathname}`).toBe(`${oidc.issuer}/authorize`);
      const query = Object.fromEntries(authorize.searchParams);
      expect(query).toMatchObject({
        response_type: 'code',
        client_id: 'postwright-test',
        redirect_uri: `${app.url}/api/auth/callback/oidc`,
        code_challenge_method: 'S256',
        state: expect.stringMatching(/^.{16,}$/),
        code_challenge: expect.stringMatching(/^[\w-]{43}$/),
        nonce: expect.stringMatching(/^.{16,}$/),
      });
      expect(query.scope?.split(' ')).toEqual(expect.arrayContaining(['openid', 'email', 'profile']));

      expect(flow.callback?.status).toBe(302);
      expect(flow.location).toBe(`${app.url}/templates?tab=all`);
      const sessionCookie = flow
        .callback!.headers.getSetCookie()
        .find((c) => c.startsWith('postwright.session_token='));
      expect(sessionCookie).toMatch(/; HttpOnly/i);
      expect(sessionCookie).toMatch(/; SameSite=Lax/i);
      expect(sessionCookie).toMatch(/; Path=\//i);
      expect(sessionCookie).not.toMatch(/; Secure/i);

      const response = await me(app, flow.cookie);
      expect(response.status).toBe(200);
      const data = (await response.json()).data;
      expect(data.user).toEqual({
        id: expect.stringMatching(/^usr_/),
        name: 'Olivia Owner',
        email: identity.email,
      });
      expect(data.role).toBe('owner');
      expect(data.team).toMatchObject({ name: "Olivia Owner's team", slug: 'olivia-owner-s-team' });
      expect(await queries(app).userCount()).toBe(1);
      expect(await queries(app).providersOf(data.user.id)).toEqual(['oidc']);

      // Setup is done: the token no longer starts anything; the owner signs in as usual.
      const again = await signInWithProvider(app.url, 'oidc', { setupToken: SETUP_TOKEN });
      expect(again.start.status).toBe(409);
      expect((await again.start.json()).error.code).toBe('CONFLICT');
      oidc.nextIdentity(identity);
      const returning = await signInWithProvider(app.url, 'oidc');
      expect(returning.location).toBe(`${app.url}/`);
      expect((await (await me(app, returning.cookie)).json()).data).toMatchObject({
        user: { id: data.user.id },
        team: { id: data.team.id },
        role: 'owner',
      });
      expect(await queries(app).userCount()).toBe(1);
    } finally {
      await app.close();
    }
  });

  it('lets exactly one of two concurrent setups through providers become owner', async () => {
    const app = await startOAuthApp(kind);
    try {
      // Both start and pass the provider before either returns; then both callbacks arrive at once.
      const pending = [];
      for (const provider of ['oidc', 'github'] as const) {
        const identity = newIdentity();
        if (provider === 'oidc') oidc.nextIdentity(identity);
        else fakes.nextIdentity('github', identity);
        const jar = new CookieJar();
        const clientIp = randomClientIp();
        const start = await fetch(`${app.url}/api/auth/sign-in/${provider}?setupToken=${SETUP_TOKEN}`, {
          redirect: 'manual',
          headers: { 'x-forwarded-for': clientIp },
        });
        jar.store(start);
        const approved = await fetch(start.headers.get('location')!, { redirect: 'manual' });
        pending.push({ jar, clientIp, callbackUrl: approved.headers.get('location')! });
      }
      const callbacks = await Promise.all(
        pending.map((p) =>
          fetch(p.callbackUrl, {
            redirect: 'manual',
            headers: { cookie: p.jar.header(), 'x-forwarded-for': p.clientIp },
          }),
        ),
      );
      const locations = callbacks.map((r) => r.headers.get('location') ?? '');
      expect(locations.filter((l) => l === `${app.url}/`)).toHaveLength(1);
      expect(
        locations.filter((l) => /\/login\?error=(setup_already_done|invitation_required)/.test(l)),
      ).toHaveLength(1);
      expect(await queries(app).userCount()).toBe(1);
      expect(await queries(app).owners()).toHaveLength(1);
    } finally {
      await app.close();
    }
  });
});

describe.each(['postgres'] as const)('sign-in with providers on %s', (kind) => {
  let app: OAuthApp;
  let owner: TeamOwner;

  beforeAll(async () => {
    app = await startOAuthApp(kind);
  });
  // Every case gets a team of its own (CONVENTIONS.md); the app and database are the file's.
  beforeEach(async () => {
    owner = await setupOwner(app.ctx.app);
  });
  afterAll(async () => app?.close());

  async function invite(email: string, expiresAt = new Date(Date.now() + 86_400_000)): Promise<void> {
    await app.ctx.app.ctx.database.db.insert(invitations).values({
      id: newId('invitation'),
      organizationId: owner.teamId,
      email,
      role: 'member',
      status: 'pending',
      expiresAt,
      inviterId: owner.userId,
    });
  }

  it('refuses a new GitHub identity without an invitation, creating no user', async () => {
    const { userCount, userByEmail } = queries(app);
    const before = await userCount();
    const stranger = newIdentity();
    fakes.nextIdentity('github', stranger);
    const flow = await signInWithProvider(app.url, 'github', { redirectTo: '/templates' });
    expect(flow.location).toMatch(loginError(app, 'invitation_required'));
    expect(flow.cookie).not.toContain('session_token');
    expect(await userByEmail(stranger.email)).toBeUndefined();

    // An API caller gets the refusal in the envelope instead of the redirect.
    fakes.nextIdentity('github', stranger);
    const api = await signInWithProvider(app.url, 'github', { accept: 'application/json' });
    expect(api.callback?.status).toBe(403);
    expect((await api.callback!.json()).error).toMatchObject({
      code: 'FORBIDDEN',
      details: { reason: 'invitation_required' },
    });
    expect(await userCount()).toBe(before);
  });

  it('creates the account of an invited person (Google) only when the provider verified the email', async () => {
    const { userCount, userByEmail, providersOf } = queries(app);
    const before = await userCount();
    const invitee = newIdentity({ emailVerified: false });
    await invite(invitee.email);

    fakes.nextIdentity('google', invitee);
    const unverified = await signInWithProvider(app.url, 'google');
    expect(unverified.location).toMatch(loginError(app, 'email_not_verified'));
    expect(await userCount()).toBe(before);

    fakes.nextIdentity('google', { ...invitee, emailVerified: true });
    const flow = await signInWithProvider(app.url, 'google', { redirectTo: '/invitations' });
    expect(flow.location).toBe(`${app.url}/invitations`);
    const user = await userByEmail(invitee.email);
    expect(user).toMatchObject({ name: invitee.name, emailVerified: true });
    expect(await providersOf(user!.id)).toEqual(['google']);
    // Signed in, and in the inviting team with the invited role (the invitation was accepted).
    const session = await fetch(`${app.url}/api/auth/get-session`, { headers: { cookie: flow.cookie } });
    expect((await session.json()).user).toMatchObject({ id: user!.id, email: invitee.email });
    expect((await (await me(app, flow.cookie)).json()).data).toMatchObject({
      team: { id: owner.teamId },
      role: 'member',
    });

    const late = newIdentity();
    await invite(late.email, new Date(Date.now() - 1000));
    fakes.nextIdentity('google', late);
    const expired = await signInWithProvider(app.url, 'google');
    expect(expired.location).toMatch(loginError(app, 'invitation_required'));
    expect(await userByEmail(late.email)).toBeUndefined();
  });

  it('links GitHub to an existing user whose email GitHub verified, and theirs is verified too', async () => {
    const { userCount, providersOf } = queries(app);
    const member = await addTeamMember(app.ctx.app, owner, 'member');
    // As if they had accepted an emailed invitation: ownership of the address proven.
    await app.ctx.app.ctx.database.db
      .update(users)
      .set({ emailVerified: true })
      .where(eq(users.id, member.userId));
    const before = await userCount();
    fakes.nextIdentity('github', newIdentity({ email: member.email, emailVerified: true }));
    const flow = await signInWithProvider(app.url, 'github', { redirectTo: '/logs' });
    expect(flow.location).toBe(`${app.url}/logs`);
    const response = await me(app, flow.cookie);
    expect(response.status).toBe(200);
    expect((await response.json()).data).toMatchObject({
      user: { id: member.userId, email: member.email },
      team: { id: owner.teamId },
      role: 'member',
    });
    expect(await providersOf(member.userId)).toEqual(['credential', 'github']);
    expect(await userCount()).toBe(before);
  });

  it('does not link a provider identity whose email is unverified', async () => {
    const member = await addTeamMember(app.ctx.app, owner, 'viewer');
    fakes.nextIdentity('github', newIdentity({ email: member.email, emailVerified: false }));
    const flow = await signInWithProvider(app.url, 'github');
    expect(flow.location).toMatch(loginError(app, 'account_not_linked'));
    expect(flow.cookie).not.toContain('session_token');
    expect(await queries(app).providersOf(member.userId)).toEqual(['credential']);
  });

  it('links Google the same way, and sign-out revokes the session on the server', async () => {
    const member = await addTeamMember(app.ctx.app, owner, 'admin');
    fakes.nextIdentity('google', newIdentity({ email: member.email }));
    const flow = await signInWithProvider(app.url, 'google');
    expect(flow.location).toBe(`${app.url}/`);
    expect((await (await me(app, flow.cookie)).json()).data).toMatchObject({
      user: { id: member.userId },
      role: 'admin',
    });

    const signOut = await fetch(`${app.url}/api/auth/sign-out`, {
      method: 'POST',
      headers: { cookie: flow.cookie, origin: app.url },
    });
    expect(signOut.status).toBe(200);
    expect((await me(app, flow.cookie)).status).toBe(401);
  });

  it('refuses a callback without the state cookie, and a replayed callback', async () => {
    const member = await addTeamMember(app.ctx.app, owner, 'member');
    fakes.nextIdentity('github', newIdentity({ email: member.email }));
    const started = await fetch(`${app.url}/api/auth/sign-in/github`, {
      redirect: 'manual',
      headers: { 'x-forwarded-for': randomClientIp() },
    });
    const approved = await fetch(started.headers.get('location')!, { redirect: 'manual' });
    const callbackUrl = approved.headers.get('location')!;
    expect(callbackUrl.startsWith(`${app.url}/api/auth/callback/github?`)).toBe(true);
    const withoutCookie = await fetch(callbackUrl, { redirect: 'manual' });
    expect(withoutCookie.headers.get('location')).toMatch(loginError(app, 'state_mismatch'));
    expect(withoutCookie.headers.getSetCookie().join()).not.toContain('session_token=');

    fakes.nextIdentity('github', newIdentity({ email: member.email }));
    const flow = await signInWithProvider(app.url, 'github');
    expect(flow.location).toBe(`${app.url}/`);
    const replay = await fetch(flow.callback!.url, { redirect: 'manual', headers: { cookie: flow.cookie } });
    expect(replay.headers.get('location')).toMatch(loginError(app, 'state_mismatch'));
    expect(replay.headers.getSetCookie().join()).not.toContain('session_token=');
    const [{ n: linked }] = (await app.ctx.app.ctx.database.db
      .select({ n: count() })
      .from(accounts)
      .where(and(eq(accounts.userId, member.userId), eq(accounts.providerId, 'github')))) as [{ n: number }];
    expect(linked).toBe(1);
  });
});
