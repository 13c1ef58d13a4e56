import { and, eq, inArray, ne, sql } from 'drizzle-orm';
import type { Database, Executor } from '../../db/client.ts';
import { members, teams, templates, uploads, users } from '../../db/schema/index.ts';
import { AppError } from '../../http/errors.ts';
import type { FileStorage } from '../storage/index.ts';
import { thumbnailKeyOf } from '../templates/index.ts';
import { teamRepository } from './teams.repository.ts';

/**
 * A team deleted with its only member (see {@link deleteUserByEmail}), and the files of it that
 * storage still holds: they are not rows, so the caller removes them once the deletion committed
 * ({@link removeDeletedTeamFiles}).
 */
export interface DeletedTeam {
  id: string;
  name: string;
  /** Storage keys of its uploaded images (`<teamId>/img_….<ext>`, the `uploads` rows). */
  uploadKeys: string[];
  /**
   * Storage keys of its templates' thumbnails (`<teamId>/thumbnails/….png`; a URL from before
   * migration 0018 mapped to its key, templates' {@link thumbnailKeyOf}).
   */
  thumbnailKeys: string[];
}

/** What {@link deleteUserByEmail} did. */
export interface DeletedUser {
  userId: string;
  /** Teams the user left; they keep their other members. */
  teamIds: string[];
  /** Teams the user was the only member of, deleted with the user. */
  deletedTeams: DeletedTeam[];
}

/**
 * `postwright delete-user <email>` (operator only; no HTTP route): deletes the account with this
 * email (compared case-insensitively), its sessions, sign-in methods, memberships and the
 * invitations it sent; keys and templates it created stay with their teams (`creator` null).
 * Why an operator needs it: an invitation link shown to its sender (a team without an adapter)
 * lets whoever holds it create the invited address's account with a password of their choice,
 * and with password sign-in only, the address's real owner then has no way in (review finding,
 * session 15); deleting that account frees the address.
 * Teams whose only member is this user are deleted with it, in the same transaction, with all they
 * hold (the team foreign keys cascade: adapters, API keys, templates and versions, email logs with
 * their history, recipients, send options and attachments, webhooks with their deliveries and
 * outbox, uploads rows, suppressions, invitations): any signed-in user can create a team of their
 * own, and nobody else could ever delete it or take it over, so the account could never be
 * deleted (review finding, integrity 1). Their queued jobs stay in the queue and end without work
 * when they run (the rows they name are gone). Their stored files are returned to be removed.
 * Each of the user's teams is locked (the members' lock) while the last-owner rule is checked:
 * a team with other members always keeps an owner.
 * @returns the deleted user's id, the teams they left and the teams deleted with them.
 * @throws NOT_FOUND (no such account); CONFLICT (details.teams) when the user is the only owner of
 *   a team that has other members (make someone else owner first); nothing is deleted then.
 */
export async function deleteUserByEmail(db: Database, email: string): Promise<DeletedUser> {
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
    // Under the locks no one joins or leaves these teams (joining takes the same lock).
    const teamIds = memberships.map((membership) => membership.teamId);
    const shared = new Set(
      teamIds.length === 0
        ? []
        : (
            await tx
              .selectDistinct({ teamId: members.organizationId })
              .from(members)
              .where(and(inArray(members.organizationId, teamIds), ne(members.userId, user.id)))
          ).map((row) => row.teamId),
    );
    const soleOwnerOf: string[] = [];
    for (const { teamId, role } of memberships) {
      if (role !== 'owner' || !shared.has(teamId)) continue;
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
    const deletedTeams = await deleteTeams(
      tx,
      teamIds.filter((teamId) => !shared.has(teamId)),
    );
    await tx.delete(users).where(eq(users.id, user.id));
    return { userId: user.id, teamIds: teamIds.filter((teamId) => shared.has(teamId)), deletedTeams };
  });
}

/**
 * Deletes teams `teamIds` in `tx` (their rows cascade) and returns each with its stored files'
 * references, as deleted: the uploads and templates are deleted first, returning what they held
 * at that moment. A concurrent upload of the team waits for the upload lock (uploads.service.ts
 * storeImage), then fails on the team's foreign key; a thumbnail job finishing later finds its
 * template gone and deletes the file it stored (templates.thumbnail.ts).
 */
async function deleteTeams(tx: Executor, teamIds: string[]): Promise<DeletedTeam[]> {
  if (teamIds.length === 0) return [];
  for (const teamId of teamIds)
    await tx.execute(sql`select pg_advisory_xact_lock(hashtext(${`uploads:${teamId}`}))`);
  const uploadRows = await tx
    .delete(uploads)
    .where(inArray(uploads.teamId, teamIds))
    .returning({ teamId: uploads.teamId, key: uploads.key });
  const templateRows = await tx
    .delete(templates)
    .where(inArray(templates.teamId, teamIds))
    .returning({ teamId: templates.teamId, thumbnail: templates.thumbnailKey });
  const teamRows = await tx
    .delete(teams)
    .where(inArray(teams.id, teamIds))
    .returning({ id: teams.id, name: teams.name });
  return teamRows
    .sort((a, b) => a.name.localeCompare(b.name))
    .map(({ id, name }) => ({
      id,
      name,
      uploadKeys: uploadRows.filter((row) => row.teamId === id).map((row) => row.key),
      thumbnailKeys: [
        ...new Set(
          templateRows.flatMap((row) => {
            const key = row.teamId === id ? thumbnailKeyOf(id, row.thumbnail) : undefined;
            return key ? [key] : [];
          }),
        ),
      ],
    }));
}

/**
 * Removes from `storage` the files of teams deleted by {@link deleteUserByEmail}, once that has
 * committed (a storage call never runs inside a transaction): their uploaded images and their
 * templates' thumbnails, by key (every one under the team's own `<teamId>/` prefix, so no other
 * team's template shows it). Images uploaded before the `uploads` table existed (migration 0015)
 * have no row and are not found.
 * @returns the keys removed, those storage did not hold (absent: removed before, or this storage is
 *   not the one the server uses), and those left, each with why (a storage error, e.g.
 *   S3_NOT_CONFIGURED); never throws.
 */
export async function removeDeletedTeamFiles(
  storage: FileStorage,
  deletedTeams: readonly DeletedTeam[],
): Promise<{ removed: string[]; absent: string[]; left: { key: string; reason: string }[] }> {
  const removed: string[] = [];
  const absent: string[] = [];
  const left: { key: string; reason: string }[] = [];
  for (const team of deletedTeams) {
    for (const key of new Set([...team.uploadKeys, ...team.thumbnailKeys])) {
      try {
        ((await storage.delete(key)) ? removed : absent).push(key);
      } catch (error) {
        left.push({ key, reason: error instanceof Error ? error.message : String(error) });
      }
    }
  }
  return { removed, absent, left };
}
