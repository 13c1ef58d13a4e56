import { fromNodeHeaders } from 'better-auth/node';
import type { FastifyReply, FastifyRequest } from 'fastify';
import { AppError } from '../../http/errors.ts';
import { isTeamRole, type Permission, permissionsOf } from '../../http/permissions.ts';
import type { SessionPrincipal } from '../../http/principal.ts';
import { findFirstTeamId, findMembership, type Membership } from './auth.repository.ts';
import { isAPIError } from './auth-light.ts';
import { assertSameOrigin } from './request-auth.ts';

/** Methods that change state: cookie requests with them must come from our own origin. */
const STATE_CHANGING_METHODS = new Set(['POST', 'PUT', 'PATCH', 'DELETE']);

/**
 * The header the dashboard sends on every API call: the id of the team its page shows. The active
 * team belongs to the session, which all tabs of a browser share, so a team switched in one tab
 * made another tab show and change that team under the old team's name (review finding, dashboard
 * session: an API key "meant for Acme" was created in Beta).
 */
const SHOWN_TEAM_HEADER = 'x-postwright-team';

/**
 * A Fastify onRequest hook for dashboard routes (session cookie); it reads headers only, so an
 * unauthenticated caller gets 401 before its body is read or validated. In order:
 * 1. reads the better-auth session from the request's cookies → 401 UNAUTHORIZED without a valid one;
 * 2. for POST/PUT/PATCH/DELETE requires `Origin` = the origin of BASE_URL → 403 FORBIDDEN otherwise
 *    (CSRF defence: browsers attach the cookie to cross-site requests, but never forge Origin);
 * 3. resolves the team: the session's active team, else the user's oldest membership
 *    → 403 FORBIDDEN (`details.reason = 'NO_TEAM'`) when they belong to none, except with
 *    `teamOptional`, where the request goes on with `request.sessionUser` and no principal;
 * 4. when the request names the team its page shows (`X-Postwright-Team: <team id>`, sent by the
 *    dashboard) and that is not the team resolved in 3 → 409 CONFLICT (`details.reason =
 *    'TEAM_SWITCHED'`, `details.teamId` = the session's team): another tab switched team. Not on
 *    `teamFallback` routes (me, list, create and switch teams: how a page learns or changes its
 *    team); without the header (API clients, curl) nothing changes;
 * 5. with `permission`, checks the member's role grants it (permissions.ts)
 *    → 403 FORBIDDEN with `details.permission`;
 * 6. sets `request.principal` (kind 'session') with the role's permissions.
 * Without `permission` only membership is required. Refreshed session cookies are forwarded.
 * API-key requests never reach this guard (access.ts picks the key guard on `X-API-Key`).
 */
export function requireSession(
  permission?: Permission,
  options: { teamFallback?: boolean; teamOptional?: boolean } = {},
) {
  return async function sessionGuard(request: FastifyRequest, reply: FastifyReply): Promise<void> {
    const { database } = request.server.ctx;
    const session = await readSession(request, reply);
    if (!session) throw new AppError('UNAUTHORIZED', 'Authentication required');

    if (STATE_CHANGING_METHODS.has(request.method)) assertSameOrigin(request);

    const userId = session.user.id;
    request.sessionUser = { userId, sessionId: session.session.id };
    const activeTeamId = session.session.activeOrganizationId;
    let membership: Membership | null = activeTeamId
      ? await findMembership(database.db, userId, activeTeamId)
      : null;
    if (!membership && activeTeamId && !options.teamFallback) {
      // Removed from the team this session works on: refuse rather than act on another team the
      // dashboard is not showing. Team listing, switching and /me still answer (teamFallback).
      throw new AppError('FORBIDDEN', 'You are no longer a member of this team', {
        reason: 'TEAM_ACCESS_REVOKED',
        teamId: activeTeamId,
      });
    }
    if (!membership) {
      // No active team yet (or, for team-context routes, a revoked one): the oldest membership.
      const firstTeamId = await findFirstTeamId(database.db, userId);
      membership = firstTeamId ? await findMembership(database.db, userId, firstTeamId) : null;
    }
    if (!membership) {
      // A user left, or removed from, their last team may still list and create teams (review
      // finding, session 15: every route answered NO_TEAM, creating a team too, and they were stuck).
      if (options.teamOptional) return;
      throw new AppError('FORBIDDEN', 'You are not a member of any team', { reason: 'NO_TEAM' });
    }
    const shownTeamId = request.headers[SHOWN_TEAM_HEADER];
    if (
      !options.teamFallback &&
      typeof shownTeamId === 'string' &&
      shownTeamId !== '' &&
      shownTeamId !== membership.teamId
    ) {
      throw new AppError('CONFLICT', 'Your team was switched in another tab', {
        reason: 'TEAM_SWITCHED',
        teamId: membership.teamId,
      });
    }
    if (!isTeamRole(membership.role)) {
      throw new AppError('FORBIDDEN', 'Your role in this team grants no access', { reason: 'UNKNOWN_ROLE' });
    }

    const permissions = permissionsOf(membership.role);
    if (permission && !permissions.has(permission)) {
      throw new AppError('FORBIDDEN', `Missing permission ${permission}`, { permission });
    }
    const principal: SessionPrincipal = {
      kind: 'session',
      userId,
      sessionId: session.session.id,
      teamId: membership.teamId,
      role: membership.role,
      permissions,
    };
    request.principal = principal;
  };
}

/** The session behind the request's cookie, or null; forwards a refreshed or cleared cookie. */
async function readSession(request: FastifyRequest, reply: FastifyReply) {
  try {
    const result = await request.server.ctx.auth.api.getSession({
      headers: fromNodeHeaders(request.headers),
      returnHeaders: true,
    });
    const cookies = result.headers.getSetCookie();
    if (cookies.length > 0) reply.header('set-cookie', cookies);
    return result.response;
  } catch (error) {
    if (isAPIError(error)) return null;
    throw error;
  }
}
