import { randomBytes } from 'node:crypto';
import { count } from 'drizzle-orm';
import Fastify, { type FastifyInstance } from 'fastify';
import { serializerCompiler, validatorCompiler, type ZodTypeProvider } from 'fastify-type-provider-zod';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import type { AppContext } from '../src/app.ts';
import { loadConfig } from '../src/config.ts';
import { sessions, users } from '../src/db/schema/index.ts';
import { ok } from '../src/http/envelope.ts';
import { installErrorHandling } from '../src/http/error-handler.ts';
import { PERMISSIONS } from '../src/http/permissions.ts';
import { sessionOf } from '../src/http/principal.ts';
import { fastifyTrustProxy } from '../src/http/trust-proxy.ts';
import { authRoutes, createAuth, requireSession, setupUrl } from '../src/modules/auth/index.ts';
import {
  addTeamMember,
  cookieHeaderFrom,
  ORIGIN_HEADERS,
  randomClientIp,
  sessionHeaders,
  setupOwner,
  signIn,
  type TeamOwner,
} from './helpers/auth.ts';
import { createTestDatabase, type DatabaseKind } from './helpers/database.ts';

const SETUP_TOKEN = 'test-setup-token-0123456789abcdef';
const BASE_URL = 'http://dashboard.postwright.test';

/**
 * A minimal app with what the auth module needs (until buildApp can be used here): error
 * envelope, `ctx` with config/database/auth, the auth routes and three probe routes.
 */
async function buildAuthTestApp(
  kind: DatabaseKind,
): Promise<{ app: FastifyInstance; close: () => Promise<void> }> {
  const database = await createTestDatabase(kind);
  const config = loadConfig({ BASE_URL, SETUP_TOKEN, LOG_LEVEL: 'silent' });
  const encryptionKey = randomBytes(32);
  const app = Fastify({
    logger: false,
    trustProxy: fastifyTrustProxy(config.TRUST_PROXY),
  }).withTypeProvider<ZodTypeProvider>();
  app.setValidatorCompiler(validatorCompiler);
  app.setSerializerCompiler(serializerCompiler);
  installErrorHandling(app);
  const auth = createAuth({ config, database: database.handle, encryptionKey });
  app.decorate('ctx', { config, database: database.handle, encryptionKey, auth } as unknown as AppContext);
  app.decorateRequest('principal', null);
  await app.register(authRoutes);

  const present = (request: Parameters<typeof sessionOf>[0]) => {
    const p = sessionOf(request);
    return ok({ userId: p.userId, sessionId: p.sessionId, teamId: p.teamId, role: p.role });
  };
  app.get('/probe/member', { preHandler: requireSession() }, async (request) => present(request));
  app.post('/probe/member', { preHandler: requireSession() }, async (request) => present(request));
  app.post('/probe/adapters', { preHandler: requireSession('adapters:create') }, async (request) =>
    present(request),
  );
  await app.ready();
  return {
    app,
    close: async () => {
      await app.close();
      await database.drop();
    },
  };
}

function expectEnvelopeError(
  response: { statusCode: number; json: () => unknown },
  status: number,
  code: string,
): Record<string, unknown> {
  expect(response.statusCode).toBe(status);
  const body = response.json() as {
    success: boolean;
    error: { code: string; message: string; details: object };
  };
  expect(body.success).toBe(false);
  expect(body.error.code).toBe(code);
  expect(typeof body.error.message).toBe('string');
  expect(body.error.details).toBeTypeOf('object');
  return body.error.details as Record<string, unknown>;
}

// First-run setup happens once per database: this case has a database of its own, where no
// other case can have completed it first.
describe.each(['postgres'] as const)('first-run setup on %s', (kind) => {
  let app: FastifyInstance;
  let close: () => Promise<void>;

  beforeAll(async () => {
    ({ app, close } = await buildAuthTestApp(kind));
  });
  afterAll(async () => close?.());

  it('runs the first-run setup once, with the token, and signs the owner in', async () => {
    const before = await app.inject({ method: 'GET', url: '/api/auth/setup' });
    expect(before.statusCode).toBe(200);
    expect(before.json()).toEqual({ success: true, data: { required: true } });
    expect(setupUrl(app.ctx.config)).toBe(`${BASE_URL}/setup?token=${SETUP_TOKEN}`);

    const payload = {
      token: SETUP_TOKEN,
      name: 'Ada Owner',
      email: 'Ada@Example.test',
      password: 'correct horse battery',
      teamName: 'Acme Mail Ops',
    };
    const wrongToken = await app.inject({
      method: 'POST',
      url: '/api/auth/setup',
      payload: { ...payload, token: 'not-the-token' },
    });
    expectEnvelopeError(wrongToken, 401, 'INVALID_TOKEN');

    const shortPassword = await app.inject({
      method: 'POST',
      url: '/api/auth/setup',
      payload: { ...payload, password: 'short' },
    });
    const details = expectEnvelopeError(shortPassword, 400, 'VALIDATION_ERROR');
    expect(details.issues).toEqual([expect.objectContaining({ path: 'body.password' })]);

    const created = await app.inject({ method: 'POST', url: '/api/auth/setup', payload });
    expect(created.statusCode).toBe(201);
    const data = created.json().data;
    expect(data.user).toEqual({
      id: expect.stringMatching(/^usr_/),
      name: 'Ada Owner',
      email: 'ada@example.test',
    });
    expect(data.team).toEqual({
      id: expect.stringMatching(/^team_/),
      name: 'Acme Mail Ops',
      slug: 'acme-mail-ops',
    });
    const setCookie = String(created.headers['set-cookie']);
    expect(setCookie).toContain('postwright.session_token=');
    expect(setCookie).toMatch(/HttpOnly/i);
    // The session cookie it set signs the owner in.
    const me = await app.inject({
      method: 'GET',
      url: '/api/auth/me',
      headers: { cookie: cookieHeaderFrom(created) },
    });
    expect(me.statusCode, me.body).toBe(200);
    expect(me.json().data).toMatchObject({
      user: { id: data.user.id },
      team: { id: data.team.id },
      role: 'owner',
    });

    const after = await app.inject({ method: 'GET', url: '/api/auth/setup' });
    expect(after.json()).toEqual({ success: true, data: { required: false } });

    const again = await app.inject({
      method: 'POST',
      url: '/api/auth/setup',
      payload: { ...payload, email: 'second@example.test' },
    });
    expectEnvelopeError(again, 409, 'CONFLICT');
  });
});

describe.each(['postgres'] as const)('auth on %s', (kind) => {
  let app: FastifyInstance;
  let close: () => Promise<void>;
  let owner: TeamOwner;

  beforeAll(async () => {
    ({ app, close } = await buildAuthTestApp(kind));
  });
  // Every case gets a team of its own (CONVENTIONS.md); the app and database are the describe's.
  beforeEach(async () => {
    owner = await setupOwner(app, { name: 'Ada Owner', teamName: 'Acme Mail Ops' });
  });
  afterAll(async () => close?.());

  it('describes the owner with all 16 permissions (team:manage included) at /api/auth/me', async () => {
    const me = await app.inject({ method: 'GET', url: '/api/auth/me', headers: { cookie: owner.cookie } });
    expect(me.statusCode).toBe(200);
    const data = me.json().data;
    expect(data.user).toEqual({ id: owner.userId, name: 'Ada Owner', email: owner.email });
    const team = { id: owner.teamId, name: 'Acme Mail Ops', slug: expect.stringMatching(/^acme-mail-ops/) };
    expect(data.team).toEqual(team);
    expect(data.role).toBe('owner');
    expect(data.permissions).toEqual([...PERMISSIONS]);
    expect(data.permissions).toHaveLength(16);
    expect(data.permissions).toContain('team:manage');
    expect(data.teams).toEqual([{ ...team, role: 'owner' }]);

    const probe = await app.inject({
      method: 'GET',
      url: '/probe/member',
      headers: { cookie: owner.cookie },
    });
    expect(probe.json().data).toEqual({
      userId: owner.userId,
      sessionId: expect.stringMatching(/^ses_/),
      teamId: owner.teamId,
      role: 'owner',
    });
  });

  it('answers 401 UNAUTHORIZED in the envelope without a valid session', async () => {
    expectEnvelopeError(await app.inject({ method: 'GET', url: '/api/auth/me' }), 401, 'UNAUTHORIZED');
    expectEnvelopeError(
      await app.inject({
        method: 'GET',
        url: '/probe/member',
        headers: { cookie: 'postwright.session_token=forged.value' },
      }),
      401,
      'UNAUTHORIZED',
    );
    expectEnvelopeError(
      await app.inject({ method: 'POST', url: '/probe/adapters', headers: ORIGIN_HEADERS(app) }),
      401,
      'UNAUTHORIZED',
    );
  });

  it('signs out through better-auth, and signs in again with the password', async () => {
    const session = await setupOwner(app);
    // An empty body declared as JSON, as fetch clients send it: better-auth must not choke on it.
    const signOut = await app.inject({
      method: 'POST',
      url: '/api/auth/sign-out',
      headers: { ...sessionHeaders(app, session), 'content-type': 'application/json' },
    });
    expect(signOut.statusCode).toBe(200);
    expectEnvelopeError(
      await app.inject({ method: 'GET', url: '/api/auth/me', headers: { cookie: session.cookie } }),
      401,
      'UNAUTHORIZED',
    );

    const cookie = await signIn(app, session.email.toUpperCase(), session.password);
    const me = await app.inject({ method: 'GET', url: '/api/auth/me', headers: { cookie } });
    expect(me.statusCode).toBe(200);
    expect(me.json().data).toMatchObject({
      user: { id: session.userId },
      team: { id: session.teamId },
      role: 'owner',
    });
  });

  it('changes the password and revokes other sessions, even when the caller asks to keep them; the new session keeps its team', async () => {
    // A password is changed mostly because it leaked: better-auth kept the other sessions alive
    // unless asked (review finding, session 15).
    const team = await setupOwner(app);
    const otherDevice = await signIn(app, team.email, team.password);
    const changed = await app.inject({
      method: 'POST',
      url: '/api/auth/change-password',
      headers: sessionHeaders(app, team),
      payload: {
        currentPassword: team.password,
        newPassword: 'a brand new password',
        revokeOtherSessions: false,
      },
    });
    expect(changed.statusCode).toBe(200);
    const cookie = cookieHeaderFrom(changed);
    const me = await app.inject({ method: 'GET', url: '/api/auth/me', headers: { cookie } });
    expect(me.json().data).toMatchObject({ user: { id: team.userId }, team: { id: team.teamId } });
    const probe = await app.inject({ method: 'GET', url: '/api/auth/get-session', headers: { cookie } });
    expect(probe.json().session.activeOrganizationId).toBe(team.teamId);
    expectEnvelopeError(
      await app.inject({ method: 'GET', url: '/api/auth/me', headers: { cookie: otherDevice } }),
      401,
      'UNAUTHORIZED',
    );
  });

  it('refuses a wrong password with 401 in our envelope', async () => {
    const wrong = await app.inject({
      method: 'POST',
      url: '/api/auth/sign-in/email',
      headers: ORIGIN_HEADERS(app),
      remoteAddress: randomClientIp(),
      payload: { email: owner.email, password: 'wrong password' },
    });
    const details = expectEnvelopeError(wrong, 401, 'UNAUTHORIZED');
    expect(details.reason).toBe('INVALID_EMAIL_OR_PASSWORD');
    expect(wrong.headers['set-cookie']).toBeUndefined();

    const invalidBody = await app.inject({
      method: 'POST',
      url: '/api/auth/sign-in/email',
      headers: ORIGIN_HEADERS(app),
      remoteAddress: randomClientIp(),
      payload: { email: owner.email },
    });
    expectEnvelopeError(invalidBody, 400, 'VALIDATION_ERROR');

    const signUp = await app.inject({
      method: 'POST',
      url: '/api/auth/sign-up/email',
      headers: ORIGIN_HEADERS(app),
      remoteAddress: randomClientIp(),
      payload: { email: 'mallory@example.test', password: 'mallory-password', name: 'Mallory' },
    });
    expect(signUp.statusCode).toBe(400);
    expect(signUp.json().success).toBe(false);
  });

  it('rate-limits sign-in per client IP, not per spoofable header, with 429 RATE_LIMITED', async () => {
    const attempt = (remoteAddress: string, spoofed: string) =>
      app.inject({
        method: 'POST',
        url: '/api/auth/sign-in/email',
        headers: { ...ORIGIN_HEADERS(app), 'x-forwarded-for': spoofed, 'x-postwright-client-ip': spoofed },
        remoteAddress,
        payload: { email: owner.email, password: 'wrong password' },
      });
    const attacker = randomClientIp();
    for (let i = 0; i < 3; i++) expect((await attempt(attacker, randomClientIp())).statusCode).toBe(401);
    const limited = await attempt(attacker, randomClientIp());
    const details = expectEnvelopeError(limited, 429, 'RATE_LIMITED');
    expect(details.retryAfter).toBeGreaterThan(0);

    // Another client is not in the attacker's bucket.
    expect((await attempt(randomClientIp(), attacker)).statusCode).toBe(401);
  });

  it('lets members and viewers in by membership but refuses permissions they lack', async () => {
    const team = await setupOwner(app);
    for (const role of ['member', 'viewer'] as const) {
      const user = await addTeamMember(app, team, role);
      const me = await app.inject({ method: 'GET', url: '/api/auth/me', headers: { cookie: user.cookie } });
      expect(me.json().data).toMatchObject({ role, team: { id: team.teamId } });
      expect(me.json().data.permissions).not.toContain('adapters:create');
      expect(me.json().data.permissions).not.toContain('team:manage');

      const membership = await app.inject({
        method: 'POST',
        url: '/probe/member',
        headers: sessionHeaders(app, user),
      });
      expect(membership.statusCode).toBe(200);
      expect(membership.json().data).toMatchObject({ userId: user.userId, teamId: team.teamId, role });

      const denied = await app.inject({
        method: 'POST',
        url: '/probe/adapters',
        headers: sessionHeaders(app, user),
      });
      expect(expectEnvelopeError(denied, 403, 'FORBIDDEN')).toEqual({ permission: 'adapters:create' });
    }
    const allowed = await app.inject({
      method: 'POST',
      url: '/probe/adapters',
      headers: sessionHeaders(app, team),
    });
    expect(allowed.statusCode).toBe(200);
  });

  it('refuses state-changing cookie requests from a foreign or missing Origin', async () => {
    const team = await setupOwner(app);
    const foreign = await app.inject({
      method: 'POST',
      url: '/probe/member',
      headers: { cookie: team.cookie, origin: 'https://evil.example' },
    });
    expectEnvelopeError(foreign, 403, 'FORBIDDEN');
    const missing = await app.inject({
      method: 'POST',
      url: '/probe/member',
      headers: { cookie: team.cookie },
    });
    expectEnvelopeError(missing, 403, 'FORBIDDEN');
    const read = await app.inject({
      method: 'GET',
      url: '/probe/member',
      headers: { cookie: team.cookie, origin: 'https://evil.example' },
    });
    expect(read.statusCode).toBe(200);

    // better-auth's own endpoints check Origin on cookie requests too; its 403 comes in our envelope.
    const signOut = await app.inject({
      method: 'POST',
      url: '/api/auth/sign-out',
      headers: { cookie: team.cookie, origin: 'https://evil.example' },
    });
    expect(expectEnvelopeError(signOut, 403, 'FORBIDDEN')).toEqual({ reason: 'INVALID_ORIGIN' });
    expect(
      (await app.inject({ method: 'GET', url: '/api/auth/me', headers: { cookie: team.cookie } })).statusCode,
    ).toBe(200);
  });

  it('keeps the invitation rights of owners (merged plugin statements) and denies them to members', async () => {
    const team = await setupOwner(app);
    const member = await addTeamMember(app, team, 'member');
    const invite = (user: { cookie: string }) =>
      app.ctx.auth.api.createInvitation({
        headers: new Headers({ cookie: user.cookie }),
        body: { email: `invitee-${randomBytes(3).toString('hex')}@example.test`, role: 'member' },
      });
    const byOwner = await invite(team);
    expect(byOwner).toMatchObject({ id: expect.stringMatching(/^inv_/), organizationId: team.teamId });
    await expect(invite(member)).rejects.toMatchObject({ statusCode: 403 });
  });

  it("closes the organization plugin's own HTTP endpoints (our team routes apply our rules)", async () => {
    const team = await setupOwner(app);
    for (const [method, url] of [
      ['POST', '/api/auth/organization/create'],
      ['POST', '/api/auth/organization/delete'],
      ['POST', '/api/auth/organization/update-member-role'],
      ['POST', '/api/auth/organization/invite-member'],
      ['GET', '/api/auth/organization/list'],
    ] as const) {
      const response = await app.inject({
        method,
        url,
        headers: sessionHeaders(app, team),
        ...(method === 'POST' ? { payload: { organizationId: team.teamId } } : {}),
      });
      expectEnvelopeError(response, 404, 'NOT_FOUND');
    }
  });

  it('answers unknown better-auth paths with 404 NOT_FOUND and oversized bodies with 400', async () => {
    expectEnvelopeError(
      await app.inject({ method: 'GET', url: '/api/auth/no-such-endpoint' }),
      404,
      'NOT_FOUND',
    );
    const huge = await app.inject({
      method: 'POST',
      url: '/api/auth/sign-in/email',
      headers: ORIGIN_HEADERS(app),
      remoteAddress: randomClientIp(),
      payload: { email: owner.email, password: 'x'.repeat(100_000) },
    });
    expect(expectEnvelopeError(huge, 400, 'INVALID_INPUT')).toEqual({ reason: 'BODY_TOO_LARGE' });
  });
});

describe.each(['postgres'] as const)('concurrent setup on %s', (kind) => {
  let app: FastifyInstance;
  let close: () => Promise<void>;
  beforeAll(async () => {
    ({ app, close } = await buildAuthTestApp(kind));
  });
  afterAll(async () => close?.());

  it('creates exactly one owner', async () => {
    const attempts = await Promise.all(
      Array.from({ length: 5 }, (_, i) =>
        app.inject({
          method: 'POST',
          url: '/api/auth/setup',
          payload: {
            token: SETUP_TOKEN,
            name: `Owner ${i}`,
            email: `owner${i}@example.test`,
            password: 'correct horse battery',
            teamName: `Team ${i}`,
          },
        }),
      ),
    );
    expect(attempts.map((r) => r.statusCode).sort()).toEqual([201, 409, 409, 409, 409]);
    const [{ value: userCount }] = (await app.ctx.database.db.select({ value: count() }).from(users)) as [
      { value: number },
    ];
    expect(userCount).toBe(1);
    const [{ value: sessionCount }] = (await app.ctx.database.db
      .select({ value: count() })
      .from(sessions)) as [{ value: number }];
    expect(sessionCount).toBe(1);
  });
});
