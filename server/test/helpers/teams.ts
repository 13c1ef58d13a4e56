import { randomBytes } from 'node:crypto';
import type { FastifyInstance, LightMyRequestResponse } from 'fastify';
import { expect } from 'vitest';
import { ORIGIN_HEADERS, randomClientIp, sessionHeaders } from './auth.ts';

type User = { cookie: string };
type Method = 'GET' | 'POST' | 'PUT' | 'DELETE';

/** A dashboard request by `user` (cookie + our Origin), from a fresh client IP. */
export function asUser(
  app: FastifyInstance,
  user: User,
  method: Method,
  url: string,
  payload?: Record<string, unknown>,
): Promise<LightMyRequestResponse> {
  return app.inject({
    method,
    url,
    headers: sessionHeaders(app, user),
    remoteAddress: randomClientIp(),
    ...(payload === undefined ? {} : { payload }),
  });
}

/** A unique invitee address (mixed case, as people type them). */
export function inviteeEmail(label = 'invitee'): string {
  return `${label}-${randomBytes(5).toString('hex')}@Example.test`;
}

/** POST /api/team/invitations by `manager`; returns the raw response. */
export function invite(app: FastifyInstance, manager: User, body: { email: string; role: string }) {
  return asUser(app, manager, 'POST', '/api/team/invitations', body);
}

/**
 * POST /api/team/invitations expecting 201; returns `data` ({id, email, role, expiresAt, delivery,
 * …}, and `url` when the team has no adapter to email the link: then the delivery is skipped).
 */
export async function buildInvitation(
  app: FastifyInstance,
  manager: User,
  body: Partial<{ email: string; role: string }> = {},
) {
  const response = await invite(app, manager, { email: inviteeEmail(), role: 'member', ...body });
  expect(response.statusCode, response.body).toBe(201);
  return response.json().data as {
    id: string;
    email: string;
    role: string;
    url?: string;
    expiresAt: string;
    delivery: { status: string; reason?: string };
  };
}

/** The acceptance token at the end of an invitation link (`BASE_URL/invite/<token>`). */
export function tokenOf(url: string | undefined): string {
  const match = /\/invite\/([^/?#\s"<]+)/.exec(url ?? '');
  if (!match?.[1]) throw new Error(`no invitation link in ${url}`);
  return decodeURIComponent(match[1]);
}

/**
 * POST /api/auth/invitations/:token/accept, signed in as `user` when given, else anonymous with
 * `body` ({name, password}); Origin set as the dashboard's browser sends it.
 */
export function acceptInvitation(
  app: FastifyInstance,
  token: string,
  options: { user?: User; body?: Record<string, unknown> } = {},
) {
  return app.inject({
    method: 'POST',
    url: `/api/auth/invitations/${encodeURIComponent(token)}/accept`,
    headers: options.user ? sessionHeaders(app, options.user) : ORIGIN_HEADERS(app),
    remoteAddress: randomClientIp(),
    ...(options.body === undefined ? {} : { payload: options.body }),
  });
}

/** GET /api/team/members as `user`, expecting 200; returns the members. */
export async function listMembers(app: FastifyInstance, user: User) {
  const response = await asUser(app, user, 'GET', '/api/team/members');
  expect(response.statusCode, response.body).toBe(200);
  return response.json().data as Array<{
    userId: string;
    name: string;
    email: string;
    role: string;
    joinedAt: string;
  }>;
}
