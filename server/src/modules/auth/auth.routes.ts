import { fromNodeHeaders } from 'better-auth/node';
import type { FastifyInstance, FastifyRequest } from 'fastify';
import type { ZodTypeProvider } from 'fastify-type-provider-zod';
import { ok } from '../../http/envelope.ts';
import { sessionOf } from '../../http/principal.ts';
import { betterAuthMount } from './auth.mount.ts';
import { meResponse, setupBody, setupResponse, setupStatusResponse } from './auth.schema.ts';
import { completeSetup, describeSession } from './auth.service.ts';
import { CLIENT_IP_HEADER } from './better-auth.ts';
import { requireSession } from './require-session.ts';
import { isSetupRequired } from './setup-token.ts';

/** The caller's headers as better-auth expects them, with the client IP Fastify resolved. */
function authHeaders(request: FastifyRequest): Headers {
  const headers = fromNodeHeaders(request.headers);
  headers.set(CLIENT_IP_HEADER, request.ip);
  return headers;
}

/**
 * Session routes (issue #2):
 * - `GET /api/auth/setup` → `{required}`: true while no user exists.
 * - `POST /api/auth/setup {token, name, email, password, teamName}` → 201 `{user, team}` and the
 *   session cookie; 401 INVALID_TOKEN, 409 CONFLICT, 400 VALIDATION_ERROR.
 * - `GET /api/auth/me` (session) → user, active team, role, permissions, teams.
 * - everything else under `/api/auth/*` is better-auth's (sign-in/email, sign-out, get-session,
 *   organization/*), errors in our envelope.
 */
export async function authRoutes(app: FastifyInstance): Promise<void> {
  const routes = app.withTypeProvider<ZodTypeProvider>();

  routes.get(
    '/api/auth/setup',
    {
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
    '/api/auth/me',
    {
      preValidation: requireSession(),
      schema: {
        tags: ['auth'],
        summary: 'The signed-in user, active team, role and permissions',
        security: [{ session: [] }],
        response: { 200: meResponse },
      },
    },
    async (request) => ok(await describeSession(app.ctx.database.db, sessionOf(request))),
  );

  await app.register(betterAuthMount);
}
