import type { Database, Executor } from '../../db/client.ts';
import { AppError, notFound } from '../../http/errors.ts';
import type { SessionPrincipal } from '../../http/principal.ts';
import { newUnguessableId } from '../../ids.ts';
import type { JobQueue } from '../../jobs/queue.ts';
import type { TeamRole } from '../auth/index.ts';
import { queueInvitationEmail } from './invitation-email.ts';
import { hashInvitationToken, invitationUrl, newInvitationToken } from './invitation-token.ts';
import { ownerRequired } from './member-rules.ts';
import { type InvitationDetails, type InvitationRow, teamRepository } from './teams.repository.ts';
import {
  type CreatedInvitationView,
  INVITATION_TTL_DAYS,
  type InvitationSummaryView,
  type InvitationView,
} from './teams.schema.ts';

const DAY_MS = 24 * 60 * 60 * 1000;

/**
 * What invitation services need besides the database: the job queue the invitation email goes
 * through; links are `${baseUrl}/invite/<token>`.
 */
export interface InvitationDeps {
  db: Database;
  queue: JobQueue;
  baseUrl: string;
  log: { warn: (details: object, message: string) => void };
}

function presentInvitation(row: InvitationRow, inviterName: string): InvitationView {
  return {
    id: row.id,
    email: row.email,
    role: row.role ?? 'member',
    expiresAt: row.expiresAt.toISOString(),
    createdAt: row.createdAt.toISOString(),
    inviter: { id: row.inviterId, name: inviterName },
  };
}

/**
 * Invites `email` into the caller's active team with `role` (issue #3, `POST /api/team/invitations`);
 * valid for {@link INVITATION_TTL_DAYS} days from `now`. A pending invitation for the same email is
 * reused, not duplicated: it takes the new role, inviter and expiry and keeps its id, and its
 * earlier links stop working (a renewal gets a link of its own); `created` says which happened. The link goes by email through the team's sending adapter: the
 * `invitation.send` job is enqueued in the transaction that writes the invitation
 * (`delivery: queued`), and a worker makes the link's token and sends it, so no SMTP wait happens
 * here and the token is in no response, job payload or log (issue #8). When the team has no active
 * adapter or no sender (`skipped`, logged), a token is made here and its link returned in `url`,
 * this once; it replaces the invitation's previous token. Nothing about delivery is thrown.
 * Only owners invite owners, or re-invite an email whose pending invitation is for owner.
 * @throws FORBIDDEN (403, reason OWNER_REQUIRED), ALREADY_EXISTS (409) when the email belongs to a
 *   member of the team.
 */
export async function createInvitation(
  deps: InvitationDeps,
  principal: SessionPrincipal,
  input: { email: string; role: TeamRole },
  now: Date,
): Promise<{ invitation: CreatedInvitationView; created: boolean }> {
  const { teamId } = principal;
  if (input.role === 'owner' && principal.role !== 'owner') throw ownerRequired();
  const expiresAt = new Date(now.getTime() + INVITATION_TTL_DAYS * DAY_MS);

  // Only `tx` inside: on PGlite (one connection) the root database would wait for this transaction.
  const { id, created, delivery, token } = await deps.db.transaction(async (tx) => {
    await teamRepository.lockTeam(tx, teamId);
    if (await teamRepository.isMemberByEmail(tx, teamId, input.email)) {
      throw new AppError('ALREADY_EXISTS', `${input.email} is already a member of this team`);
    }
    const saved = await saveInvitation(tx, principal, input, expiresAt, now);
    const delivery = await queueInvitationEmail(tx, deps.queue, teamId, saved.id);
    if (delivery.status === 'queued') return { ...saved, delivery, token: undefined };
    // Nothing can email the link: the inviter gets it (so it proves nothing about the mailbox).
    const fresh = newInvitationToken();
    await teamRepository.updateInvitation(tx, saved.id, { tokenHash: fresh.tokenHash, tokenEmailed: false });
    return { ...saved, delivery, token: fresh.token };
  });

  if (delivery.status !== 'queued') {
    deps.log.warn({ invitationId: id, teamId, delivery }, 'invitation email not sent');
  }
  const details = (await teamRepository.findInvitationDetails(deps.db, id))!;
  const view = presentInvitation(details, details.inviterName);
  const url = token === undefined ? {} : { url: invitationUrl(deps.baseUrl, token) };
  return { invitation: { ...view, delivery, ...url }, created };
}

/**
 * Renews the team's pending invitation for the email (new role, inviter, expiry; same id) or
 * inserts a new one. @throws FORBIDDEN (OWNER_REQUIRED) when a non-owner renews an owner's invitation.
 */
async function saveInvitation(
  tx: Executor,
  principal: SessionPrincipal,
  input: { email: string; role: TeamRole },
  expiresAt: Date,
  now: Date,
): Promise<{ id: string; created: boolean }> {
  const pending = await teamRepository.findPendingInvitation(tx, principal.teamId, input.email);
  if (pending) {
    if (pending.role === 'owner' && principal.role !== 'owner') throw ownerRequired();
    // Earlier links stop working at once: the renewal's own link is made for it (by the email job,
    // or below when nothing can email it). Kept, an earlier link accepted with the new role, so an
    // admin's link of a renewal as owner made its holder an owner (review finding, session 16).
    await teamRepository.updateInvitation(tx, pending.id, {
      role: input.role,
      expiresAt,
      inviterId: principal.userId,
      tokenHash: null,
      tokenEmailed: false,
    });
    return { id: pending.id, created: false };
  }
  const row = await teamRepository.insertInvitation(tx, {
    // Random (no creation time to read off it), though it accepts nothing: the link has a token.
    id: newUnguessableId('invitation'),
    organizationId: principal.teamId,
    email: input.email,
    role: input.role,
    status: 'pending',
    expiresAt,
    inviterId: principal.userId,
    createdAt: now,
  });
  return { id: row.id, created: true };
}

/**
 * The team's pending, unexpired invitations, newest first (issue #3, `GET /api/team/invitations`);
 * without links (issue #8: the token is never listed).
 */
export async function listInvitations(db: Executor, teamId: string, now: Date): Promise<InvitationView[]> {
  const rows = await teamRepository.listPendingInvitations(db, teamId, now);
  return rows.map((row) => presentInvitation(row.invitation, row.inviterName));
}

/**
 * Cancels a pending invitation of the caller's active team (issue #3, `DELETE /api/team/invitations/:id`);
 * its link stops working at once. Only owners cancel an invitation for owner, as only they create or
 * renew one. Under the team's lock, as inviting is, so the role checked is the one canceled.
 * @throws NOT_FOUND (404) when the team has no pending invitation with this id; FORBIDDEN (403,
 *   reason OWNER_REQUIRED) when a non-owner cancels an owner's invitation.
 */
export async function cancelInvitation(db: Database, principal: SessionPrincipal, id: string): Promise<void> {
  const { teamId } = principal;
  // Only `tx` inside: on PGlite (one connection) the root database would wait for this transaction.
  await db.transaction(async (tx) => {
    await teamRepository.lockTeam(tx, teamId);
    const pending = await teamRepository.findInvitationDetails(tx, id, { forUpdate: true });
    if (pending?.organizationId !== teamId || pending.status !== 'pending') throw notFound('Invitation');
    if (pending.role === 'owner' && principal.role !== 'owner') throw ownerRequired();
    if (!(await teamRepository.cancelInvitation(tx, teamId, id))) throw notFound('Invitation');
  });
}

/**
 * Checks that an invitation can still be answered at `now`; an `accepted` one passes only when
 * `allowAccepted` (it is shown, but not accepted twice).
 * @throws NOT_FOUND (404) for an unknown, canceled or rejected invitation, and for an expired one
 *   with `details.reason = 'EXPIRED'`; CONFLICT (409, reason ALREADY_ACCEPTED) for an accepted one.
 */
export function ensureOpenInvitation(
  invitation: InvitationDetails | undefined,
  now: Date,
  options: { allowAccepted?: boolean } = {},
): asserts invitation is InvitationDetails {
  if (!invitation) throw notFound('Invitation');
  if (invitation.status === 'accepted') {
    if (options.allowAccepted) return;
    throw new AppError('CONFLICT', 'This invitation has already been accepted', {
      reason: 'ALREADY_ACCEPTED',
    });
  }
  if (invitation.status !== 'pending') throw notFound('Invitation');
  if (invitation.expiresAt.getTime() <= now.getTime()) {
    throw new AppError('NOT_FOUND', 'This invitation has expired', { reason: 'EXPIRED' });
  }
}

/**
 * What an invitation is for (issue #3, `GET /api/auth/invitations/:token`, no authentication: the
 * token the link carries is the credential; an invitation id finds nothing): the invited email and
 * role, the team, the inviter's name, the expiry and the status (`pending` or `accepted`). Not
 * whether an account exists for the email (issue #8).
 * @throws NOT_FOUND (404) as {@link ensureOpenInvitation} (expired: reason EXPIRED).
 */
export async function describeInvitation(
  db: Executor,
  token: string,
  now: Date,
): Promise<InvitationSummaryView> {
  const invitation = await teamRepository.findInvitationDetailsByTokenHash(db, hashInvitationToken(token));
  ensureOpenInvitation(invitation, now, { allowAccepted: true });
  return {
    id: invitation.id,
    email: invitation.email,
    role: invitation.role ?? 'member',
    team: { id: invitation.organizationId, name: invitation.teamName },
    inviterName: invitation.inviterName,
    expiresAt: invitation.expiresAt.toISOString(),
    status: invitation.status,
  };
}
