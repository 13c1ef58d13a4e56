import { AppError } from '../../http/errors.ts';
import { permissionsOf } from '../../http/permissions.ts';
import type { TeamRole } from '../auth/index.ts';

/** Who asks for a membership change: their user id, role, and whether they hold `team:manage`. */
export interface MemberChangeActor {
  userId: string;
  role: TeamRole;
  canManage: boolean;
}

/** A change to one membership: a new role, or removal (a removal of oneself is leaving). */
export type MemberChange = { kind: 'updateRole'; role: TeamRole } | { kind: 'remove' };

/** 403 FORBIDDEN for a caller without `team:manage` (`details.permission`, as requireSession says it). */
export function missingTeamManage(): AppError {
  return new AppError('FORBIDDEN', 'Missing permission team:manage', { permission: 'team:manage' });
}

/** 403 FORBIDDEN (`details.reason = 'OWNER_REQUIRED'`): only owners change, remove or appoint owners. */
export function ownerRequired(): AppError {
  return new AppError('FORBIDDEN', 'Only an owner can change, remove or appoint an owner', {
    reason: 'OWNER_REQUIRED',
  });
}

/**
 * Decides whether `actor` may apply `change` to the membership of `target` in a team that has
 * `ownerCount` owners (issue #3, "Teams"). Returns nothing when allowed; throws otherwise:
 * - FORBIDDEN (403, `details.permission = 'team:manage'`) when the actor lacks team:manage, except
 *   that anyone may remove themself (leave);
 * - FORBIDDEN (403, `details.reason = 'OWNER_REQUIRED'`) when a non-owner (an admin) changes or
 *   removes an owner, or makes someone owner;
 * - CONFLICT (409, `details.reason = 'LAST_OWNER'`) when the change would leave the team without
 *   an owner (the last owner leaving, being removed or demoted).
 */
export function checkMemberChange(
  actor: MemberChangeActor,
  target: { userId: string; role: string },
  ownerCount: number,
  change: MemberChange,
): void {
  const leaving = change.kind === 'remove' && target.userId === actor.userId;
  if (!leaving) {
    if (!actor.canManage) throw missingTeamManage();
    const touchesOwner = target.role === 'owner' || (change.kind === 'updateRole' && change.role === 'owner');
    if (touchesOwner && actor.role !== 'owner') throw ownerRequired();
  }
  const losesOwner = target.role === 'owner' && (change.kind === 'remove' || change.role !== 'owner');
  if (losesOwner && ownerCount <= 1) {
    throw new AppError('CONFLICT', 'A team must keep at least one owner', { reason: 'LAST_OWNER' });
  }
}

/**
 * True when a member whose role is now `inviterRole` (undefined: no longer a member) may still
 * grant `role` through an invitation they sent: the rules that let them send it (issue #3: team:manage;
 * only owners invite owners), checked again when it is accepted. An invitation used to outlive its
 * inviter (review finding, session 13): a removed or demoted admin came back as admin through an
 * invitation they had sent to another address of theirs, and a removed owner came back as owner
 * and removed the owner who had removed them.
 */
export function inviterMayGrant(inviterRole: string | undefined, role: string | null): boolean {
  if (inviterRole === undefined || !permissionsOf(inviterRole).has('team:manage')) return false;
  return role !== 'owner' || inviterRole === 'owner';
}
