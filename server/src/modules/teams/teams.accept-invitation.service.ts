import type { Database, Executor } from '../../db/client.ts';
import { isUniqueViolation } from '../../db/errors.ts';
import { AppError, validationError } from '../../http/errors.ts';
import { newId } from '../../ids.ts';
import { type Auth, insertUserWithPassword } from '../auth/index.ts';
import { callAuthApi } from './auth-api.ts';
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
  invitationId: string;
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
 * Accepts an invitation (issue #3, `POST /api/auth/invitations/:id/accept`):
 * - signed in as the invited email: the user becomes a member with the invited role and the
 *   session's active team becomes the invitation's (better-auth `setActiveOrganization`);
 * - not signed in, with `{name, password}`: creates the account (email + password credential, as
 *   the first-run setup does: public sign-up stays disabled), the membership, and signs in
 *   (better-auth `signInEmail`); the new session starts in the team. Refused when password
 *   sign-in is off (AUTH_PASSWORD=false): the invitee then signs in through a provider (which may
 *   create their account, see sign-up-policy) and accepts signed in.
 * The invitation is marked accepted in the same transaction as the membership, under the team's
 * lock and the invitation's row lock, so it is accepted at most once.
 * better-auth's own acceptInvitation is not used: with our TypeID ids it requires a verified email,
 * which accounts made by the first-run setup do not have.
 * @throws NOT_FOUND (404; reason EXPIRED when expired), CONFLICT (409, reason ALREADY_ACCEPTED),
 *   FORBIDDEN (403, reason WRONG_ACCOUNT) when signed in as another email, ALREADY_EXISTS (409,
 *   reason ALREADY_MEMBER), UNAUTHORIZED (401, reason SIGN_IN_REQUIRED) when not signed in but an
 *   account with the email exists, FORBIDDEN (403, reason PASSWORD_SIGN_IN_DISABLED) when not
 *   signed in, no account with the email exists and password sign-in is off, VALIDATION_ERROR (400)
 *   when name or password is missing.
 */
export async function acceptInvitation(
  deps: AcceptInvitationDeps,
  input: AcceptInvitationInput,
  now: Date,
): Promise<AcceptInvitationResult> {
  const invitation = await teamRepository.findInvitationDetails(deps.db, input.invitationId);
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
  if (await teamRepository.findUserIdByEmail(deps.db, invitation.email)) throw signInRequired();
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
  const passwordHash = await (await deps.auth.$context).password.hash(account.password);

  let accepted: AcceptedInvitationView;
  try {
    accepted = await deps.db.transaction(async (tx) => {
      const open = await lockOpenInvitation(tx, invitation, now);
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

/** Takes the team's lock and the invitation's row lock, then checks again that it is open. */
async function lockOpenInvitation(
  tx: Executor,
  invitation: InvitationDetails,
  now: Date,
): Promise<InvitationDetails> {
  await teamRepository.lockTeam(tx, invitation.organizationId);
  const locked = await teamRepository.findInvitationDetails(tx, invitation.id, { forUpdate: true });
  ensureOpenInvitation(locked, now);
  return locked;
}

/** Adds `userId` to the invitation's team with its role and marks the invitation accepted. */
async function addMember(
  tx: Executor,
  invitation: InvitationDetails,
  userId: string,
): Promise<AcceptedInvitationView> {
  const role = invitation.role ?? 'member';
  await teamRepository.insertMember(tx, {
    id: newId('member'),
    teamId: invitation.organizationId,
    userId,
    role,
  });
  await teamRepository.updateInvitation(tx, invitation.id, { status: 'accepted' });
  const member = (await teamRepository.findMember(tx, invitation.organizationId, userId))!;
  return {
    user: { id: member.userId, name: member.name, email: member.email },
    team: { id: invitation.organizationId, name: invitation.teamName, slug: invitation.teamSlug },
    role,
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
