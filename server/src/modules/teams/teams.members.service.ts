import type { Database, Executor } from '../../db/client.ts';
import { notFound } from '../../http/errors.ts';
import { TEAM_ROLES } from '../../http/permissions.ts';
import type { SessionPrincipal } from '../../http/principal.ts';
import {
  clearActiveTeam,
  deleteMember,
  isTeamRole,
  permissionsOf,
  setMemberRole,
  type TeamRole,
} from '../auth/index.ts';
import {
  checkMemberChange,
  inviterMayGrant,
  type MemberChange,
  type MemberChangeActor,
  missingTeamManage,
} from './member-rules.ts';
import { type MemberRow, teamRepository } from './teams.repository.ts';
import type { MemberView } from './teams.schema.ts';

/** The read shape of a membership (`joinedAt` in ISO 8601). */
export function presentMember(row: MemberRow): MemberView {
  return {
    userId: row.userId,
    name: row.name,
    email: row.email,
    role: row.role,
    joinedAt: row.joinedAt.toISOString(),
  };
}

/** Members of `teamId`, longest-standing first. */
export async function listMembers(db: Executor, teamId: string): Promise<MemberView[]> {
  return (await teamRepository.listMembers(db, teamId)).map(presentMember);
}

/**
 * Gives the member `userId` of the caller's active team the role `role` (issue #3, "Teams").
 * Rules in {@link checkMemberChange}: team:manage required; only an owner changes an owner or
 * appoints one; the last owner cannot be demoted.
 * @throws NOT_FOUND (404) when `userId` is not a member of the caller's team (another team's
 *   member included), FORBIDDEN (403), CONFLICT (409, reason LAST_OWNER).
 */
export async function updateMemberRole(
  db: Database,
  principal: SessionPrincipal,
  userId: string,
  role: TeamRole,
): Promise<MemberView> {
  return changeMember(db, principal, userId, { kind: 'updateRole', role }, async (tx, target) => {
    if (target.role !== role) {
      await setMemberRole(tx, principal.teamId, userId, role);
      await cancelInvitationsRevoked(tx, principal.teamId, userId, role);
    }
    return presentMember({ ...target, role });
  });
}

/**
 * Removes the member `userId` from the caller's active team; removing oneself is leaving, which
 * needs no team:manage (issue #3, "Teams"). Rules in {@link checkMemberChange}: only an owner
 * removes an owner; the last owner can neither leave nor be removed. requireSession checks the
 * membership on every request, so a removed member loses access at once: their sessions still point
 * at the team and are refused (403 TEAM_ACCESS_REVOKED) until they switch teams, rather than acting
 * on another team unseen. Someone who leaves by themself has their sessions pointed at no team.
 * @throws FORBIDDEN (403) without team:manage (checked before the member is looked up),
 *   NOT_FOUND (404), CONFLICT (409, reason LAST_OWNER).
 */
export async function removeMember(db: Database, principal: SessionPrincipal, userId: string): Promise<void> {
  if (userId !== principal.userId && !principal.permissions.has('team:manage')) throw missingTeamManage();
  await changeMember(db, principal, userId, { kind: 'remove' }, async (tx) => {
    await deleteMember(tx, principal.teamId, userId);
    await cancelInvitationsRevoked(tx, principal.teamId, userId, undefined);
    if (userId === principal.userId) await clearActiveTeam(tx, userId, principal.teamId);
  });
}

/**
 * Cancels the pending invitations `userId` sent that their new role (undefined: removed) no longer
 * lets them grant: the rule accepting checks again (member-rules.ts inviterMayGrant).
 */
async function cancelInvitationsRevoked(
  tx: Executor,
  teamId: string,
  userId: string,
  role: TeamRole | undefined,
): Promise<void> {
  const revoked = TEAM_ROLES.filter((invited) => !inviterMayGrant(role, invited));
  if (revoked.length === 0) return;
  // All of them: also any invitation whose role is unset (accepted as member).
  const roles = revoked.length === TEAM_ROLES.length ? undefined : revoked;
  await teamRepository.cancelInvitationsBy(tx, teamId, userId, roles);
}

/**
 * Runs `apply` under the team's lock once the rules allow `change`. The actor's role is read again
 * under the lock, so two owners demoting each other at once cannot leave the team without one.
 */
async function changeMember<T>(
  db: Database,
  principal: SessionPrincipal,
  userId: string,
  change: MemberChange,
  apply: (tx: Executor, target: MemberRow) => Promise<T>,
): Promise<T> {
  const teamId = principal.teamId;
  return db.transaction(async (tx) => {
    await teamRepository.lockTeam(tx, teamId);
    const actorRow = await teamRepository.findMember(tx, teamId, principal.userId);
    const target = await teamRepository.findMember(tx, teamId, userId);
    // The caller was removed since their request was authenticated: the team is no longer theirs.
    if (!actorRow || !isTeamRole(actorRow.role)) throw notFound('Team');
    if (!target) throw notFound('Member');
    const actor: MemberChangeActor = {
      userId: principal.userId,
      role: actorRow.role,
      canManage: permissionsOf(actorRow.role).has('team:manage'),
    };
    checkMemberChange(actor, target, await teamRepository.countOwners(tx, teamId), change);
    return apply(tx, target);
  });
}
