import { and, eq, inArray, ne, sql } from 'drizzle-orm';
import type { Database } from '../../db/client.ts';
import { members, teams, users } from '../../db/schema/index.ts';
import { AppError } from '../../http/errors.ts';
import { teamRepository } from './teams.repository.ts';

/**
 * `postwright delete-user <email>` (operator only; no HTTP route): deletes the account with this
 * email (compared case-insensitively), its sessions, sign-in methods, memberships and the
 * invitations it sent; keys and templates it created stay with their teams (`creator` null).
 * Why an operator needs it: an invitation link shown to its sender (a team without an adapter)
 * lets whoever holds it create the invited address's account with a password of their choice,
 * and with password sign-in only, the address's real owner then has no way in (review finding,
 * session 15); deleting that account frees the address.
 * Each of the user's teams is locked (the members' lock) while the last-owner rule is checked:
 * a team always keeps an owner.
 * @returns the deleted user's id and the ids of the teams they left.
 * @throws NOT_FOUND (no such account); CONFLICT (details.teams) when the user is the only owner of
 *   a team (make someone else owner first).
 */
export async function deleteUserByEmail(
  db: Database,
  email: string,
): Promise<{ userId: string; teamIds: string[] }> {
  return db.transaction(async (tx) => {
    const [user] = await tx
      .select({ id: users.id })
      .from(users)
      .where(sql`lower(${users.email}) = lower(${email})`);
    if (!user) throw new AppError('NOT_FOUND', `No account with the email ${email}`);
    const readMemberships = () =>
      tx
        .select({ teamId: members.organizationId, role: members.role })
        .from(members)
        .where(eq(members.userId, user.id))
        .orderBy(members.organizationId);
    // The roles that count are the ones read under the teams' locks: while this waited for one
    // team's lock, another team's owner could make the user its owner and leave (review finding,
    // session 16: the team was then left without an owner). Read again until every team is locked.
    const locked = new Set<string>();
    let memberships = await readMemberships();
    for (;;) {
      for (const { teamId } of memberships) {
        if (locked.has(teamId)) continue;
        await teamRepository.lockTeam(tx, teamId);
        locked.add(teamId);
      }
      memberships = await readMemberships();
      if (memberships.every(({ teamId }) => locked.has(teamId))) break;
    }
    const soleOwnerOf: string[] = [];
    for (const { teamId, role } of memberships) {
      if (role !== 'owner') continue;
      const [other] = await tx
        .select({ id: members.id })
        .from(members)
        .where(
          and(eq(members.organizationId, teamId), eq(members.role, 'owner'), ne(members.userId, user.id)),
        )
        .limit(1);
      if (!other) soleOwnerOf.push(teamId);
    }
    if (soleOwnerOf.length > 0) {
      const names = await tx
        .select({ id: teams.id, name: teams.name })
        .from(teams)
        .where(inArray(teams.id, soleOwnerOf));
      throw new AppError(
        'CONFLICT',
        `${email} is the only owner of: ${names.map((t) => t.name).join(', ')}`,
        {
          teams: names,
        },
      );
    }
    await tx.delete(users).where(eq(users.id, user.id));
    return { userId: user.id, teamIds: memberships.map((membership) => membership.teamId) };
  });
}
