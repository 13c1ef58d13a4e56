import { randomBytes, randomInt } from 'node:crypto';
import type { FastifyInstance, LightMyRequestResponse } from 'fastify';
import { insertMember, insertTeam, insertUserWithPassword } from '../../src/modules/auth/auth.repository.ts';
import { resolveSetupToken } from '../../src/modules/auth/index.ts';
import type { TeamRole } from '../../src/modules/auth/permissions.ts';
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
