import { getCurrentAdapter } from 'better-auth';
import { APIError, getOAuthState } from 'better-auth/api';
import type { Database } from '../../db/client.ts';
import type { TeamRole } from '../../http/permissions.ts';
import { slugify } from '../../slug.ts';
import {
  anotherUserExists,
  deleteUser,
  insertMember,
  insertTeam,
  lockSetup,
  teamSlugTaken,
} from './auth.repository.ts';

/**
 * Key in better-auth's OAuth server context (`addOAuthServerContext`, carried in the state across
 * the provider redirect and never client-supplied) that marks a sign-in started with a valid
 * setup token.
 */
export const SETUP_SERVER_CONTEXT_KEY = 'postwrightSetup';

/** Why a new identity gets no account; the `error` of the `/login?error=…` redirect. */
export type SignUpRefusal =
  | 'invitation_required'
  | 'email_not_verified'
  | 'setup_token_required'
  | 'setup_already_done';

const REFUSAL_MESSAGES: Record<SignUpRefusal, string> = {
  invitation_required: 'No account exists for this email. Ask a team owner or admin for an invitation.',
  email_not_verified: 'The identity provider has not verified this email address.',
  setup_token_required: 'No account exists yet. Complete the setup from the setup link first.',
  setup_already_done: 'Setup has already been completed.',
};

/** What is known about a new identity when better-auth is about to create its user. */
export interface SignUpFacts {
  /** The provider says it verified the email (GitHub `/user/emails`, OIDC `email_verified`). */
  emailVerified: boolean;
  /** A pending invitation that has not expired exists for the email. */
  hasPendingInvitation: boolean;
  anyUserExists: boolean;
  /** The sign-in was started with the valid setup token. */
  setupAuthorized: boolean;
}

export type SignUpDecision =
  | { admitted: true; as: 'invitee' | 'first-owner' }
  | { admitted: false; reason: SignUpRefusal };

/**
 * Whether a first sign-in with a new identity may create an account (issue #3 "Sign-in"):
 * - no user exists yet: only through setup, i.e. started with the setup token (the same token that
 *   guards `POST /api/auth/setup`, issue #2) → the first owner;
 * - otherwise only with a pending, unexpired invitation for that email, and only when the provider
 *   verified the email (an unverified address would let anyone claim someone else's invitation).
 */
export function decideSignUp(facts: SignUpFacts): SignUpDecision {
  if (!facts.anyUserExists) {
    return facts.setupAuthorized
      ? { admitted: true, as: 'first-owner' }
      : { admitted: false, reason: 'setup_token_required' };
  }
  if (!facts.hasPendingInvitation) return { admitted: false, reason: 'invitation_required' };
  if (!facts.emailVerified) return { admitted: false, reason: 'email_not_verified' };
  return { admitted: true, as: 'invitee' };
}

/**
 * better-auth's error for a refused sign-up: 403 with `code` = the refusal. Its OAuth callback turns
 * it into a redirect to the error URL with `?error=<code>&error_description=<message>`.
 */
export function signUpRefused(reason: SignUpRefusal): APIError {
  return new APIError('FORBIDDEN', { code: reason, message: REFUSAL_MESSAGES[reason] });
}

/** The subset of better-auth's database adapter the policy reads through. */
interface AdapterReader {
  findMany: <T>(query: {
    model: string;
    where?: Array<{ field: string; value: unknown; operator?: 'eq' | 'gt' }>;
    limit?: number;
  }) => Promise<T[]>;
}

/** The user fields better-auth hands to `databaseHooks.user.create.*`. */
interface NewUser {
  id?: string;
  name?: string | null;
  email: string;
  emailVerified?: boolean | null;
}

/**
 * Accepts every pending, unexpired invitation for a new user's provider-verified email (the teams
 * module's `joinInvitedTeams`, injected so that auth does not import teams).
 */
export type JoinInvitedTeams = (user: { id: string; email: string }) => Promise<void>;

/** True when the current OAuth flow was started with the valid setup token (see provider-sign-in.ts). */
async function isSetupFlow(): Promise<boolean> {
  try {
    const state = await getOAuthState();
    return state?.serverContext?.[SETUP_SERVER_CONTEXT_KEY] === true;
  } catch {
    // Not inside a better-auth request (a server-side createUser): no OAuth flow, no setup.
    return false;
  }
}

async function gatherFacts(adapter: AdapterReader, user: NewUser): Promise<SignUpFacts> {
  const [anyUser, invitations] = await Promise.all([
    adapter.findMany<{ id: string }>({ model: 'user', limit: 1 }),
    adapter.findMany<{ id: string }>({
      model: 'invitation',
      where: [
        { field: 'email', value: user.email.toLowerCase() },
        { field: 'status', value: 'pending' },
        { field: 'expiresAt', operator: 'gt', value: new Date() },
      ],
      limit: 1,
    }),
  ]);
  return {
    emailVerified: user.emailVerified === true,
    hasPendingInvitation: invitations.length > 0,
    anyUserExists: anyUser.length > 0,
    setupAuthorized: await isSetupFlow(),
  };
}

/**
 * `databaseHooks.user.create` of better-auth, which enforce {@link decideSignUp} for every user it
 * creates (in our configuration only OAuth callbacks create users; setup and test helpers insert
 * directly):
 * - `before` runs inside better-auth's user+account transaction and reads through its current
 *   adapter (on PGlite, one connection, a query beside that transaction would wait forever); a
 *   refusal throws {@link signUpRefused}, so no user row is written.
 * - `after` runs once that transaction has committed. For the first owner it takes the setup lock
 *   and creates the team "<name>'s team" with the owner membership, so the session that follows
 *   starts in it. When a concurrent setup won the race, it deletes the user it was called for and
 *   refuses with `setup_already_done`: exactly one first owner, as with `POST /api/auth/setup`.
 *   For an invitee it calls `joinInvitedTeams` (the teams module accepts their pending invitations),
 *   so they land in the team with the invited role (issue #8) rather than in no team at all.
 */
export function signUpHooks(deps: {
  db: Database;
  defaultAdapter: () => Promise<AdapterReader>;
  joinInvitedTeams?: JoinInvitedTeams | undefined;
}) {
  return {
    before: async (user: NewUser, context: { context: { adapter: unknown } } | null): Promise<void> => {
      const fallback = context ? (context.context.adapter as AdapterReader) : await deps.defaultAdapter();
      const adapter = (await getCurrentAdapter(fallback as never)) as unknown as AdapterReader;
      const decision = decideSignUp(await gatherFacts(adapter, user));
      if (!decision.admitted) throw signUpRefused(decision.reason);
    },
    after: async (user: NewUser): Promise<void> => {
      if (!user.id) return;
      if (await isSetupFlow()) {
        const outcome = await makeFirstOwner(deps.db, { ...user, id: user.id });
        if (outcome === 'lost-race') throw signUpRefused('setup_already_done');
        return;
      }
      // `before` admitted only invitees whose email the provider verified.
      if (user.emailVerified === true) await deps.joinInvitedTeams?.({ id: user.id, email: user.email });
    },
  };
}

/** The first owner's team name: "Ada Lovelace's team" (the email's local part when the name is empty). */
export function firstTeamName(user: { name?: string | null; email: string }): string {
  const name = user.name?.trim() || user.email.split('@')[0] || 'My';
  return `${name.slice(0, 80)}'s team`;
}

async function makeFirstOwner(db: Database, user: NewUser & { id: string }): Promise<'owner' | 'lost-race'> {
  return db.transaction(async (tx) => {
    await lockSetup(tx);
    if (await anotherUserExists(tx, user.id)) {
      await deleteUser(tx, user.id);
      return 'lost-race';
    }
    const name = firstTeamName(user);
    const base = slugify(name, 'team', 48);
    const slug = (await teamSlugTaken(tx, base)) ? `${base}-${user.id.slice(-6).toLowerCase()}` : base;
    const team = await insertTeam(tx, { name, slug });
    await insertMember(tx, { teamId: team.id, userId: user.id, role: 'owner' satisfies TeamRole });
    return 'owner';
  });
}
