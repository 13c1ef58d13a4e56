import type { Database, Executor } from '../../db/client.ts';
import { isUniqueViolation } from '../../db/errors.ts';
import { AppError, notFound } from '../../http/errors.ts';
import type { SessionPrincipal } from '../../http/principal.ts';
import { firstFreeSlug, slugify } from '../../slug.ts';
import {
  type Auth,
  describeSession,
  findMembership,
  isTeamRole,
  permissionsOf,
  type SessionDescription,
} from '../auth/index.ts';
import { authErrorCode, callAuthApi, fromAuthApiError } from './auth-api.ts';
import { teamRepository } from './teams.repository.ts';
import type { TeamView } from './teams.schema.ts';

/** Longest slug generated from a team name (as the first-run setup does). */
const TEAM_SLUG_MAX_LENGTH = 48;
/**
 * Slug attempts before giving up when concurrent creations keep taking the chosen one: each lost
 * attempt means another creation took that slug, so N creations of one name at once all succeed
 * while N ≤ this (as templates.service.ts GENERATED_SLUG_TRIES; it was 3, review finding, session 22).
 */
const SLUG_ATTEMPTS = 20;

/** The teams `userId` belongs to with their role in each, oldest membership first. */
export async function listTeams(db: Executor, userId: string): Promise<TeamView[]> {
  const rows = await teamRepository.listTeamsOfUser(db, userId);
  return rows.map((row) => ({ ...row, createdAt: row.createdAt.toISOString() }));
}

/**
 * Creates a team named `name` whose owner is the signed-in caller (issue #3: "the creator becomes
 * owner"), through better-auth's `createOrganization` with the caller's request `headers`. The
 * slug comes from the name, made unique across the instance with `-2`, `-3`, … The session's
 * active team does not change: `POST /api/auth/switch-team` moves to the new team.
 * @throws errors of better-auth in our codes (see {@link fromAuthApiError}); CONFLICT (409) with
 *   `details.reason = "SLUG_CONTENTION"` when concurrent creations took every slug chosen in
 *   {@link SLUG_ATTEMPTS} tries (a retry gets the next free one). Review finding, session 22: a
 *   creation that lost the race at the insert (unique violation on `teams_slug_unique`, not
 *   better-auth's own look-up) was answered 500 INTERNAL_ERROR, and so was running out of tries.
 */
export async function createTeam(
  deps: { db: Database; auth: Auth },
  headers: Headers,
  name: string,
): Promise<TeamView> {
  const base = slugify(name, 'team', TEAM_SLUG_MAX_LENGTH);
  for (let attempt = 1; attempt <= SLUG_ATTEMPTS; attempt++) {
    const slug = firstFreeSlug(base, await teamRepository.slugsLike(deps.db, base));
    try {
      const team = await deps.auth.api.createOrganization({
        headers,
        body: { name, slug, keepCurrentActiveOrganization: true },
      });
      return {
        id: team.id,
        name: team.name,
        slug: team.slug,
        role: 'owner',
        createdAt: team.createdAt.toISOString(),
      };
    } catch (error) {
      // Another team took the slug between our look-up and better-auth's (its own check, or its
      // insert when both checks passed at once): look again.
      if (authErrorCode(error) === 'ORGANIZATION_ALREADY_EXISTS') continue;
      if (isUniqueViolation(error, 'teams_slug_unique')) continue;
      throw fromAuthApiError(error);
    }
  }
  throw new AppError('CONFLICT', 'Teams of this name are being created at the same time: try again', {
    reason: 'SLUG_CONTENTION',
  });
}

/**
 * Makes `teamId` the active team of the caller's session (issue #3, `POST /api/auth/switch-team`),
 * through better-auth's `setActiveOrganization` with the request `headers`; every resource
 * endpoint then works on that team. Returns what `GET /api/auth/me` returns for the new team and
 * the refreshed session cookie.
 * @throws NOT_FOUND (404) when the caller is not a member of `teamId` (unknown teams included), so
 *   a team's existence is not revealed to outsiders.
 */
export async function switchTeam(
  deps: { db: Database; auth: Auth },
  principal: SessionPrincipal,
  headers: Headers,
  teamId: string,
): Promise<{ session: SessionDescription; setCookie: string[] }> {
  // Checked here first: better-auth answers a non-member with 403 and also clears the active team.
  const membership = await findMembership(deps.db, principal.userId, teamId);
  if (!membership || !isTeamRole(membership.role)) throw notFound('Team');
  const result = await callAuthApi(() =>
    deps.auth.api.setActiveOrganization({ headers, body: { organizationId: teamId }, returnHeaders: true }),
  );
  const switched: SessionPrincipal = {
    ...principal,
    teamId,
    role: membership.role,
    permissions: permissionsOf(membership.role),
  };
  return { session: await describeSession(deps.db, switched), setCookie: result.headers.getSetCookie() };
}
