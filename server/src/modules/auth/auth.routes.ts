import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import type { ZodTypeProvider } from 'fastify-type-provider-zod';
import type { AccessRule } from '../../http/access.ts';
import { redirectResponse } from '../../http/access-docs.ts';
import { ok } from '../../http/envelope.ts';
import { AppError } from '../../http/errors.ts';
import { sessionOf } from '../../http/principal.ts';
import { betterAuthMount } from './auth.mount.ts';
import {
  meResponse,
  providersResponse,
  setupBody,
  setupResponse,
  setupStatusResponse,
  signInStartParams,
  signInStartQuery,
} from './auth.schema.ts';
import { completeSetup, describeSession } from './auth.service.ts';
import { SIGN_IN_STARTS_PER_MINUTE, startProviderSignIn } from './provider-sign-in.ts';
import { authHeaders } from './request-auth.ts';
import { requireSession } from './require-session.ts';
import { isSetupRequired } from './setup-token.ts';
import { enabledSignInMethods } from './sign-in-methods.ts';

/**
 * Access rules of these routes for the route table (http/access.ts). Declared as plain route
 * config, with `/api/auth/me` keeping its own `requireSession()` hook (what `access()` would
 * install), so this plugin needs no guards registered with http (auth.test.ts mounts it alone).
 */
const PUBLIC: { access: AccessRule } = { access: { kind: 'public' } };
/** `/me` answers on the oldest remaining team when the active one was revoked, and never checks
 * X-Postwright-Team (its hook's `teamFallback`; the OpenAPI document reads the rule). */
const MEMBER: { access: AccessRule } = { access: { kind: 'session', teamFallback: true } };

/**
 * Counts an OAuth sign-in start against the client IP's budget ({@link SIGN_IN_STARTS_PER_MINUTE}
 * per minute, the app's rate limiter: shared through Redis when REDIS_URL is set).
 * @throws AppError RATE_LIMITED (429) with `Retry-After` once the budget is spent.
 */
async function limitSignInStarts(request: FastifyRequest, reply: FastifyReply): Promise<void> {
  const decision = await request.server.ctx.rateLimiter.consume(
    `sign-in:${request.ip}`,
    SIGN_IN_STARTS_PER_MINUTE,
  );
  if (decision.allowed) return;
  reply.header('Retry-After', decision.resetSeconds);
  throw new AppError('RATE_LIMITED', 'Too many sign-in attempts. Please try again later.', {
    retryAfter: decision.resetSeconds,
  });
}

/**
 * Session routes (issues #2 and #3):
 * - `GET /api/auth/setup` → `{required}`: true while no user exists.
 * - `POST /api/auth/setup {token, name, email, password, teamName}` → 201 `{user, team}` and the
 *   session cookie; 401 INVALID_TOKEN, 409 CONFLICT, 400 VALIDATION_ERROR.
 * - `GET /api/auth/me` (session) → user, active team, role, permissions, teams.
 * - `GET /api/auth/providers` → `[{id, name, type}]`, the enabled sign-in methods.
 * - `GET /api/auth/sign-in/:provider?redirectTo=/path[&setupToken=…]` → 302 to the provider
 *   (provider-sign-in.ts); 400 VALIDATION_ERROR for a `redirectTo` that is not a same-origin path,
 *   404 NOT_FOUND for an unknown or disabled provider, 429 RATE_LIMITED per client IP.
 * - everything else under `/api/auth/*` is better-auth's open endpoints (auth.mount.ts
 *   `OPEN_AUTH_PATHS` and the providers' callbacks, described in auth-docs.ts), errors in our envelope.
 */
export async function authRoutes(app: FastifyInstance): Promise<void> {
  const routes = app.withTypeProvider<ZodTypeProvider>();

  routes.get(
    '/api/auth/setup',
    {
      config: PUBLIC,
      schema: {
        tags: ['auth'],
        summary: 'Whether the first-run setup is still required',
        response: { 200: setupStatusResponse },
      },
    },
    async () => ok({ required: await isSetupRequired(app.ctx.database.db) }),
  );

  routes.post(
    '/api/auth/setup',
    {
      config: PUBLIC,
      schema: {
        tags: ['auth'],
        summary: 'Create the first owner and team, and sign in',
        body: setupBody,
        response: { 201: setupResponse },
      },
    },
    async (request, reply) => {
      const { config, database, auth } = app.ctx;
      const result = await completeSetup(
        { config, db: database.db, auth },
        request.body,
        authHeaders(request),
      );
      reply.header('set-cookie', result.setCookie);
      return reply.code(201).send(ok({ user: result.user, team: result.team }));
    },
  );

  routes.get(
    '/api/auth/providers',
    {
      config: PUBLIC,
      schema: {
        tags: ['auth'],
        summary: 'The enabled sign-in methods',
        response: { 200: providersResponse },
      },
    },
    async () => ok(enabledSignInMethods(app.ctx.config)),
  );

  routes.get(
    '/api/auth/sign-in/:provider',
    {
      config: PUBLIC,
      preHandler: limitSignInStarts,
      schema: {
        tags: ['auth'],
        summary: 'Start signing in with an OAuth or OpenID Connect provider (302 to the provider)',
        description:
          'The provider returns to /api/auth/callback/:provider, which sets the session cookie and ' +
          'redirects to redirectTo, or to /login?error=<code> when the sign-in is refused.',
        params: signInStartParams,
        querystring: signInStartQuery,
        responseDocs: {
          302: redirectResponse('To the provider', "The provider's authorization URL"),
        },
      },
    },
    async (request, reply) => {
      const { config, database, auth } = app.ctx;
      const started = await startProviderSignIn(
        { config, db: database.db, auth },
        { provider: request.params.provider, ...request.query },
        authHeaders(request),
      );
      reply.header('set-cookie', started.setCookie);
      reply.header('cache-control', 'no-store');
      return reply.redirect(started.url, 302);
    },
  );

  routes.get(
    '/api/auth/me',
    {
      config: MEMBER,
      onRequest: requireSession(undefined, { teamFallback: true }),
      schema: {
        tags: ['auth'],
        summary: 'The signed-in user, active team, role and permissions',
        response: { 200: meResponse },
      },
    },
    async (request) => ok(await describeSession(app.ctx.database.db, sessionOf(request))),
  );

  await app.register(betterAuthMount);
}
