import type { Config } from '../../config.ts';
import type { Database } from '../../db/client.ts';
import { AppError } from '../../http/errors.ts';
import { PERMISSIONS, type Permission, type TeamRole } from '../../http/permissions.ts';
import type { SessionPrincipal } from '../../http/principal.ts';
import { slugify } from '../../slug.ts';
import {
  anyUserExists,
  findUserSummary,
  insertMember,
  insertTeam,
  insertUserWithPassword,
  listMemberships,
  lockSetup,
} from './auth.repository.ts';
import type { SetupInput } from './auth.schema.ts';
import type { Auth } from './better-auth.ts';
import { isSetupTokenValid } from './setup-token.ts';

interface TeamSummary {
  id: string;
  name: string;
  slug: string;
}
interface UserSummary {
  id: string;
  name: string;
  email: string;
}

/** What the first-run setup created, plus the session cookies to send back. */
export interface SetupResult {
  user: UserSummary;
  team: TeamSummary;
  /** `Set-Cookie` values of the new session (from better-auth's signInEmail). */
  setCookie: string[];
}

/**
 * First-run setup (issue #2): creates the first user with an email+password credential, their
 * team (slug from its name) and the owner membership in one transaction, then signs them in;
 * the new session starts in that team. Concurrent calls are serialised by an advisory lock,
 * so exactly one of them creates an owner.
 *
 * `headers` are the caller's request headers (client IP and user agent for the session).
 * @throws AppError INVALID_TOKEN (401) when the token is not the setup token,
 *   CONFLICT (409) when a user already exists, FORBIDDEN (403, `reason: PASSWORD_SIGN_IN_DISABLED`)
 *   with AUTH_PASSWORD=false (setup then goes through a provider: `GET /api/auth/sign-in/:provider
 *   ?setupToken=…`, issue #3).
 */
export async function completeSetup(
  deps: { config: Config; db: Database; auth: Auth },
  input: SetupInput,
  headers: Headers,
): Promise<SetupResult> {
  if (!isSetupTokenValid(deps.config, input.token)) {
    throw new AppError('INVALID_TOKEN', 'Invalid setup token');
  }
  if (!deps.config.AUTH_PASSWORD) {
    throw new AppError('FORBIDDEN', 'Email and password sign-in is disabled; set up through a provider', {
      reason: 'PASSWORD_SIGN_IN_DISABLED',
    });
  }
  // Cheap early answer; the check that counts is repeated under the lock below.
  if (await anyUserExists(deps.db)) throw setupDone();

  const email = input.email.toLowerCase();
  const authContext = await deps.auth.$context;
  const passwordHash = await authContext.password.hash(input.password);

  const { user, team } = await deps.db.transaction(async (tx) => {
    await lockSetup(tx);
    if (await anyUserExists(tx)) throw setupDone();
    const user = await insertUserWithPassword(tx, { name: input.name, email, passwordHash });
    const team = await insertTeam(tx, { name: input.teamName, slug: slugify(input.teamName, 'team', 48) });
    await insertMember(tx, { teamId: team.id, userId: user.id, role: 'owner' satisfies TeamRole });
    return { user, team };
  });

  const signedIn = await deps.auth.api.signInEmail({
    body: { email, password: input.password },
    headers,
    returnHeaders: true,
  });
  return { user, team, setCookie: signedIn.headers.getSetCookie() };
}

function setupDone(): AppError {
  return new AppError('CONFLICT', 'Setup has already been completed');
}

/** The body of `GET /api/auth/me`. */
export interface SessionDescription {
  user: UserSummary;
  team: TeamSummary;
  role: TeamRole;
  permissions: Permission[];
  teams: Array<TeamSummary & { role: string }>;
}

/**
 * Describes the signed-in user for the dashboard: the user, the active team and their role in
 * it, that role's permissions (in the spec's order, "Authentication" 5) and every team they
 * belong to with their role there.
 * @throws AppError UNAUTHORIZED (401) when the user no longer exists.
 */
export async function describeSession(
  db: Database,
  principal: SessionPrincipal,
): Promise<SessionDescription> {
  const [user, memberships] = await Promise.all([
    findUserSummary(db, principal.userId),
    listMemberships(db, principal.userId),
  ]);
  if (!user) throw new AppError('UNAUTHORIZED', 'Authentication required');
  const teams = memberships.map((m) => ({ id: m.teamId, name: m.name, slug: m.slug, role: m.role }));
  const active = teams.find((t) => t.id === principal.teamId);
  if (!active) throw new AppError('FORBIDDEN', 'Not a member of the active team');
  return {
    user,
    team: { id: active.id, name: active.name, slug: active.slug },
    role: principal.role,
    permissions: PERMISSIONS.filter((p) => principal.permissions.has(p)),
    teams,
  };
}
