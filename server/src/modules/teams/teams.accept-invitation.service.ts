import type { Database, Executor } from '../../db/client.ts';
import { isUniqueViolation } from '../../db/errors.ts';
import { AppError, validationError } from '../../http/errors.ts';
import { type Auth, insertMember, insertUserWithPassword } from '../auth/index.ts';
import { callAuthApi } from './auth-api.ts';
import { hashInvitationToken } from './invitation-token.ts';
import { inviterMayGrant } from './member-rules.ts';
import { ensureOpenInvitation } from './teams.invitations.service.ts';
import { type InvitationDetails, teamRepository } from './teams.repository.ts';
import type { AcceptedInvitationView, NewAccountInput } from './teams.schema.ts';

/** What accepting needs: `passwordSignIn` is config AUTH_PASSWORD (email + password sign-in on). */
export interface AcceptInvitationDeps {
  db: Database;
  auth: Auth;
  passwordSignIn: boolean;
}

/** Who accepts: the signed-in user, or nobody (the account is then created from `account`). */
export interface AcceptInvitationInput {
  /** The acceptance token from the link (invitation-token.ts); an invitation id finds nothing. */
  token: string;
  signedIn: { userId: string; email: string } | null;
  account: NewAccountInput | undefined;
  /** The caller's request headers (session cookie, client IP) for better-auth. */
  headers: Headers;
}

/** The membership created, the session cookies to send back, and whether an account was created. */
export interface AcceptInvitationResult {
  accepted: AcceptedInvitationView;
  setCookie: string[];
  accountCreated: boolean;
}

/**
 * Accepts an invitation by the token of its link (issue #3, `POST /api/auth/invitations/:token/accept`):
 * - signed in as the invited email: the user becomes a member with the invited role and the
 *   session's active team becomes the invitation's (better-auth `setActiveOrganization`);
 * - not signed in, with `{name, password}`: creates the account (email + password credential, as
 *   the first-run setup does: public sign-up stays disabled), the membership, and signs in
 *   (better-auth `signInEmail`); the new session starts in the team. Refused when password
 *   sign-in is off (AUTH_PASSWORD=false): the invitee then signs in through a provider (which
 *   creates their account and puts them in the team, see sign-up-policy) and accepts signed in.
 * Accepting proves nothing about the mailbox (security review, session 12): the link goes out
 * through the inviting team's own adapter (send-invitation.job.ts), whose SMTP server or provider
 * account that team controls, so any signed-in user who creates a team and points its adapter at a
 * server of their own receives the "emailed" link of any address they invite, as surely as a link
 * shown to the inviter (no adapter). Until then an emailed token marked the account verified and
 * reclaimed an existing unverified account (new password, its sessions ended): anyone could take
 * over the first-run owner (created unverified) and their team that way. So an account made by
 * accepting stays unverified, and an existing account with the invited email is never touched:
 * its owner signs in and accepts signed in. Only an identity provider's verified email proves an
 * address (verified-email-reclaim.ts).
 * The invitation is marked accepted in the same transaction as the membership, under the team's
 * lock and the invitation's row lock, so it is accepted at most once.
 * better-auth's own acceptInvitation is not used: with our TypeID ids it requires a verified email,
 * which accounts made by the first-run setup do not have.
 * Not signed in, the answer does not tell whether an account has the email until a valid
 * `{name, password}` is sent (issue #8): password sign-in being off, then a missing body, are
 * refused first, the same for every email.
 * @throws NOT_FOUND (404; reason EXPIRED when expired), CONFLICT (409, reason ALREADY_ACCEPTED),
 *   FORBIDDEN (403, reason WRONG_ACCOUNT) when signed in as another email, ALREADY_EXISTS (409,
 *   reason ALREADY_MEMBER); when not signed in: FORBIDDEN (403, reason PASSWORD_SIGN_IN_DISABLED)
 *   when password sign-in is off, VALIDATION_ERROR (400) when name or password is missing, then
 *   UNAUTHORIZED (401, reason SIGN_IN_REQUIRED) when an account with the email exists.
 */
export async function acceptInvitation(
  deps: AcceptInvitationDeps,
  input: AcceptInvitationInput,
  now: Date,
): Promise<AcceptInvitationResult> {
  const tokenHash = hashInvitationToken(input.token);
  const invitation = await teamRepository.findInvitationDetailsByTokenHash(deps.db, tokenHash);
  ensureOpenInvitation(invitation, now);
  return input.signedIn
    ? acceptAsSignedInUser(deps, input, input.signedIn, invitation, now)
    : acceptWithNewAccount(deps, input, invitation, now);
}

async function acceptAsSignedInUser(
  deps: { db: Database; auth: Auth },
  input: AcceptInvitationInput,
  user: { userId: string; email: string },
  invitation: InvitationDetails,
  now: Date,
): Promise<AcceptInvitationResult> {
  if (user.email.toLowerCase() !== invitation.email.toLowerCase()) {
    throw new AppError('FORBIDDEN', 'This invitation is for another email address', {
      reason: 'WRONG_ACCOUNT',
    });
  }
  const accepted = await deps.db.transaction(async (tx) => {
    const open = await lockOpenInvitation(tx, invitation, now);
    if (await teamRepository.findMember(tx, open.organizationId, user.userId)) {
      throw new AppError('ALREADY_EXISTS', 'You are already a member of this team', {
        reason: 'ALREADY_MEMBER',
      });
    }
    return addMember(tx, open, user.userId);
  });
  const switched = await callAuthApi(() =>
    deps.auth.api.setActiveOrganization({
      headers: input.headers,
      body: { organizationId: invitation.organizationId },
      returnHeaders: true,
    }),
  );
  return { accepted, setCookie: switched.headers.getSetCookie(), accountCreated: false };
}

async function acceptWithNewAccount(
  deps: AcceptInvitationDeps,
  input: AcceptInvitationInput,
  invitation: InvitationDetails,
  now: Date,
): Promise<AcceptInvitationResult> {
  // What the caller sent is checked before whether an account has the email, so that an answer
  // without a valid `{name, password}` is the same either way: whoever holds a link (the inviter,
  // when no adapter could email it) learns nothing of which emails have accounts (issue #8).
  // No password credential may be created (nor signed in with) when password sign-in is off.
  if (!deps.passwordSignIn) {
    throw new AppError(
      'FORBIDDEN',
      'Email and password sign-in is disabled; sign in with a provider to accept',
      {
        reason: 'PASSWORD_SIGN_IN_DISABLED',
      },
    );
  }
  const account = input.account;
  if (!account) {
    throw validationError([
      { path: 'body.name', message: 'required to create the account' },
      { path: 'body.password', message: 'required to create the account' },
    ]);
  }
  // An account with the email is its owner's, verified or not: they sign in to accept.
  if (await teamRepository.findUserByEmail(deps.db, invitation.email)) throw signInRequired();
  const passwordHash = await (await deps.auth.$context).password.hash(account.password);

  let accepted: AcceptedInvitationView;
  try {
    accepted = await deps.db.transaction(async (tx) => {
      const open = await lockOpenInvitation(tx, invitation, now);
      // Unverified (insertUserWithPassword's default): accepting proves no address, see above.
      const user = await insertUserWithPassword(tx, { name: account.name, email: open.email, passwordHash });
      return addMember(tx, open, user.id);
    });
  } catch (error) {
    // Someone created an account with this email since the check above.
    if (isUniqueViolation(error, 'users_email_unique')) throw signInRequired();
    throw error;
  }
  const signedIn = await callAuthApi(() =>
    deps.auth.api.signInEmail({
      body: { email: invitation.email, password: account.password },
      headers: input.headers,
      returnHeaders: true,
    }),
  );
  return { accepted, setCookie: signedIn.headers.getSetCookie(), accountCreated: true };
}

/**
 * Puts a user whom a provider sign-in just created into every team that invited their email (issue
 * #8; called by auth's sign-up hook, which admitted them because such an invitation exists and the
 * provider verified the email, so the mailbox is theirs): each pending, unexpired invitation for
 * the email is accepted with its role, oldest first, so their first session starts in the team
 * that invited them first. Each one in its own transaction under the team's lock and the
 * invitation's row lock; one that closed meanwhile, or whose team they already belong to, is
 * skipped. Nothing is thrown for those.
 */
export async function joinInvitedTeams(
  db: Database,
  user: { id: string; email: string },
  now: Date,
): Promise<void> {
  for (const id of await teamRepository.listOpenInvitationIdsForEmail(db, user.email, now)) {
    await db.transaction(async (tx) => {
      const teamId = (await teamRepository.findInvitationDetails(tx, id))?.organizationId;
      if (!teamId) return;
      await teamRepository.lockTeam(tx, teamId);
      const open = await teamRepository.findInvitationDetails(tx, id, { forUpdate: true });
      if (open?.status !== 'pending' || open.expiresAt.getTime() <= now.getTime()) return;
      if (!(await inviterStillGrants(tx, open))) return;
      if (await teamRepository.findMember(tx, teamId, user.id)) return;
      await addMember(tx, open, user.id);
    });
  }
}

/**
 * Takes the team's lock and the invitation's row lock, then checks again that it is open and that
 * its token is still the one it was found by (a new email replaces the token).
 */
async function lockOpenInvitation(
  tx: Executor,
  invitation: InvitationDetails,
  now: Date,
): Promise<InvitationDetails> {
  await teamRepository.lockTeam(tx, invitation.organizationId);
  const found = await teamRepository.findInvitationDetails(tx, invitation.id, { forUpdate: true });
  const locked = found?.tokenHash === invitation.tokenHash ? found : undefined;
  ensureOpenInvitation(locked, now);
  if (!(await inviterStillGrants(tx, locked))) {
    throw new AppError(
      'NOT_FOUND',
      'This invitation was withdrawn: its sender may no longer invite to this role',
      {
        reason: 'INVITER_REVOKED',
      },
    );
  }
  return locked;
}

/**
 * True when the invitation's sender is still a member whose role may grant the invited role
 * (member-rules.ts inviterMayGrant); read under the team's lock.
 */
async function inviterStillGrants(tx: Executor, invitation: InvitationDetails): Promise<boolean> {
  const inviter = await teamRepository.findMember(tx, invitation.organizationId, invitation.inviterId);
  return inviterMayGrant(inviter?.role, invitation.role);
}

/** Adds `userId` to the invitation's team with its role and marks the invitation accepted. */
async function addMember(
  tx: Executor,
  invitation: InvitationDetails,
  userId: string,
): Promise<AcceptedInvitationView> {
  const role = invitation.role ?? 'member';
  await insertMember(tx, { teamId: invitation.organizationId, userId, role });
  await teamRepository.updateInvitation(tx, invitation.id, { status: 'accepted' });
  return describeMembership(tx, invitation, userId);
}

/** The user's membership of the invitation's team, as the accept answer shows it. */
async function describeMembership(
  tx: Executor,
  invitation: InvitationDetails,
  userId: string,
): Promise<AcceptedInvitationView> {
  const member = (await teamRepository.findMember(tx, invitation.organizationId, userId))!;
  return {
    user: { id: member.userId, name: member.name, email: member.email },
    team: { id: invitation.organizationId, name: invitation.teamName, slug: invitation.teamSlug },
    role: member.role,
  };
}

function signInRequired(): AppError {
  return new AppError(
    'UNAUTHORIZED',
    'An account with this email exists: sign in, then accept the invitation',
    {
      reason: 'SIGN_IN_REQUIRED',
    },
  );
}
