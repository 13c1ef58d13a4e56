import { and, asc, count, desc, eq, gt, inArray, like, or, type SQL, sql } from 'drizzle-orm';
import type { Executor } from '../../db/client.ts';
import { invitations, members, teams, users } from '../../db/schema/index.ts';

/** A team with the user's role in it. */
export interface TeamOfUser {
  id: string;
  name: string;
  slug: string;
  role: string;
  createdAt: Date;
}

/** A membership joined with its user. */
export interface MemberRow {
  memberId: string;
  userId: string;
  name: string;
  email: string;
  role: string;
  joinedAt: Date;
}

export type InvitationRow = typeof invitations.$inferSelect;

/** An invitation with its team and inviter, as shown to the invitee. */
export interface InvitationDetails extends InvitationRow {
  teamName: string;
  teamSlug: string;
  inviterName: string;
}

const memberColumns = {
  memberId: members.id,
  userId: members.userId,
  name: users.name,
  email: users.email,
  role: members.role,
  joinedAt: members.createdAt,
};

/** SQL for teams, memberships and invitations; member and invitation queries are scoped by team. */
export const teamRepository = {
  /**
   * Serialises changes to one team's memberships and invitations for the rest of the transaction
   * (advisory lock), so "last owner" and "no duplicate invitation" checks hold under concurrency.
   */
  async lockTeam(tx: Executor, teamId: string): Promise<void> {
    await tx.execute(sql`select pg_advisory_xact_lock(hashtext(${`team-members:${teamId}`}))`);
  },

  listTeamsOfUser(db: Executor, userId: string): Promise<TeamOfUser[]> {
    return db
      .select({
        id: teams.id,
        name: teams.name,
        slug: teams.slug,
        role: members.role,
        createdAt: teams.createdAt,
      })
      .from(members)
      .innerJoin(teams, eq(teams.id, members.organizationId))
      .where(eq(members.userId, userId))
      .orderBy(asc(members.createdAt), asc(members.id));
  },

  /** Slugs equal to `base` or starting with `base-` (team slugs are unique across the instance). */
  async slugsLike(db: Executor, base: string): Promise<Set<string>> {
    const rows = await db
      .select({ slug: teams.slug })
      .from(teams)
      .where(or(eq(teams.slug, base), like(teams.slug, `${base}-%`)));
    return new Set(rows.map((r) => r.slug));
  },

  listMembers(db: Executor, teamId: string): Promise<MemberRow[]> {
    return db
      .select(memberColumns)
      .from(members)
      .innerJoin(users, eq(users.id, members.userId))
      .where(eq(members.organizationId, teamId))
      .orderBy(asc(members.createdAt), asc(members.id));
  },

  async findMember(db: Executor, teamId: string, userId: string): Promise<MemberRow | undefined> {
    const [row] = await db
      .select(memberColumns)
      .from(members)
      .innerJoin(users, eq(users.id, members.userId))
      .where(and(eq(members.organizationId, teamId), eq(members.userId, userId)));
    return row;
  },

  async isMemberByEmail(db: Executor, teamId: string, email: string): Promise<boolean> {
    const rows = await db
      .select({ id: members.id })
      .from(members)
      .innerJoin(users, eq(users.id, members.userId))
      .where(and(eq(members.organizationId, teamId), eq(sql`lower(${users.email})`, email)))
      .limit(1);
    return rows.length > 0;
  },

  async countOwners(db: Executor, teamId: string): Promise<number> {
    const [row] = await db
      .select({ n: count() })
      .from(members)
      .where(and(eq(members.organizationId, teamId), eq(members.role, 'owner')));
    return row?.n ?? 0;
  },

  /** The user with this email (case-insensitive): id and whether ownership of the email was proven. */
  async findUserByEmail(
    db: Executor,
    email: string,
  ): Promise<{ id: string; emailVerified: boolean } | undefined> {
    const [row] = await db
      .select({ id: users.id, emailVerified: users.emailVerified })
      .from(users)
      .where(eq(sql`lower(${users.email})`, email.toLowerCase()))
      .limit(1);
    return row;
  },

  // ---- invitations -----------------------------------------------------------------------------

  async insertInvitation(db: Executor, row: typeof invitations.$inferInsert): Promise<InvitationRow> {
    const [created] = await db.insert(invitations).values(row).returning();
    return created!;
  },

  /** The team's pending invitation for `email` (expired or not), newest first. */
  async findPendingInvitation(
    db: Executor,
    teamId: string,
    email: string,
  ): Promise<InvitationRow | undefined> {
    const [row] = await db
      .select()
      .from(invitations)
      .where(
        and(
          eq(invitations.organizationId, teamId),
          eq(invitations.email, email),
          eq(invitations.status, 'pending'),
        ),
      )
      .orderBy(desc(invitations.createdAt))
      .limit(1);
    return row;
  },

  async updateInvitation(
    db: Executor,
    id: string,
    changes: Partial<
      Pick<InvitationRow, 'role' | 'expiresAt' | 'inviterId' | 'status' | 'tokenHash' | 'tokenEmailed'>
    >,
  ): Promise<InvitationRow> {
    const [row] = await db.update(invitations).set(changes).where(eq(invitations.id, id)).returning();
    return row!;
  },

  /** The team's pending, unexpired invitations with their inviter's name, newest first. */
  listPendingInvitations(db: Executor, teamId: string, now: Date) {
    return db
      .select({ invitation: invitations, inviterName: users.name })
      .from(invitations)
      .innerJoin(users, eq(users.id, invitations.inviterId))
      .where(
        and(
          eq(invitations.organizationId, teamId),
          eq(invitations.status, 'pending'),
          gt(invitations.expiresAt, now),
        ),
      )
      .orderBy(desc(invitations.createdAt), desc(invitations.id));
  },

  /** Marks a pending invitation of the team canceled; false when there is none with that id. */
  async cancelInvitation(db: Executor, teamId: string, id: string): Promise<boolean> {
    return (await cancelPendingInvitations(db, teamId, eq(invitations.id, id))) > 0;
  },

  /**
   * Marks canceled the pending invitations of the team that `inviterId` sent, all of them or only
   * those for `roles`. @returns how many.
   */
  cancelInvitationsBy(
    db: Executor,
    teamId: string,
    inviterId: string,
    roles?: readonly string[],
  ): Promise<number> {
    return cancelPendingInvitations(
      db,
      teamId,
      and(eq(invitations.inviterId, inviterId), roles ? inArray(invitations.role, [...roles]) : undefined),
    );
  },

  /**
   * Gives a pending, unexpired invitation a new acceptance token (its SHA-256), replacing the
   * previous one, whose link stops working. False when the invitation is no longer open.
   */
  async replaceInvitationToken(
    db: Executor,
    id: string,
    token: { tokenHash: string; tokenEmailed: boolean },
    now: Date,
  ): Promise<boolean> {
    const rows = await db
      .update(invitations)
      .set(token)
      .where(and(eq(invitations.id, id), eq(invitations.status, 'pending'), gt(invitations.expiresAt, now)))
      .returning({ id: invitations.id });
    return rows.length > 0;
  },

  /** Ids of the pending, unexpired invitations for `email` across teams, oldest first. */
  async listOpenInvitationIdsForEmail(db: Executor, email: string, now: Date): Promise<string[]> {
    const rows = await db
      .select({ id: invitations.id })
      .from(invitations)
      .where(
        and(
          eq(sql`lower(${invitations.email})`, email.toLowerCase()),
          eq(invitations.status, 'pending'),
          gt(invitations.expiresAt, now),
        ),
      )
      .orderBy(asc(invitations.createdAt), asc(invitations.id));
    return rows.map((r) => r.id);
  },

  /** An invitation with its team and inviter; `forUpdate` locks the invitation row. */
  findInvitationDetails(
    db: Executor,
    id: string,
    options: { forUpdate?: boolean } = {},
  ): Promise<InvitationDetails | undefined> {
    return findDetails(db, eq(invitations.id, id), options);
  },

  /** The invitation whose acceptance token hashes to `tokenHash`, with its team and inviter. */
  findInvitationDetailsByTokenHash(db: Executor, tokenHash: string): Promise<InvitationDetails | undefined> {
    return findDetails(db, eq(invitations.tokenHash, tokenHash));
  },
};

async function findDetails(
  db: Executor,
  condition: SQL,
  options: { forUpdate?: boolean } = {},
): Promise<InvitationDetails | undefined> {
  const query = db
    .select({
      invitation: invitations,
      teamName: teams.name,
      teamSlug: teams.slug,
      inviterName: users.name,
    })
    .from(invitations)
    .innerJoin(teams, eq(teams.id, invitations.organizationId))
    .innerJoin(users, eq(users.id, invitations.inviterId))
    .where(condition);
  const [row] = options.forUpdate ? await query.for('update', { of: invitations }) : await query;
  return (
    row && {
      ...row.invitation,
      teamName: row.teamName,
      teamSlug: row.teamSlug,
      inviterName: row.inviterName,
    }
  );
}

/** Marks canceled the team's pending invitations that also meet `where`. @returns how many. */
async function cancelPendingInvitations(
  db: Executor,
  teamId: string,
  where: SQL | undefined,
): Promise<number> {
  const rows = await db
    .update(invitations)
    .set({ status: 'canceled' })
    .where(and(eq(invitations.organizationId, teamId), eq(invitations.status, 'pending'), where))
    .returning({ id: invitations.id });
  return rows.length;
}
