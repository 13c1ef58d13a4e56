import { and, asc, eq, ne, sql } from 'drizzle-orm';
import type { Executor } from '../../db/client.ts';
import { accounts, members, sessions, teams, users } from '../../db/schema/index.ts';
import { newId } from '../../ids.ts';

/*
 * The auth module is the one writer of the auth and team tables better-auth keeps (users,
 * accounts, sessions, verifications, teams, members): other modules change them through these
 * functions, exported by index.ts (issue #9, "one owner writes the auth and team tables").
 * Invitations are the teams module's (teams.repository.ts).
 */

/** One membership of a user: the team and the user's role in it. */
export interface Membership {
  teamId: string;
  name: string;
  slug: string;
  role: string;
}

/** Advisory lock key that serialises the first-run setup (any constant unique to this purpose). */
const SETUP_LOCK_KEY = 724_002;

/** True when at least one user exists. */
export async function anyUserExists(db: Executor): Promise<boolean> {
  const rows = await db.select({ id: users.id }).from(users).limit(1);
  return rows.length > 0;
}

/**
 * Takes the setup lock for the rest of the transaction `tx`: concurrent setups queue behind it,
 * so the "no user yet" check and the inserts after it are one atomic step.
 */
export async function lockSetup(tx: Executor): Promise<void> {
  await tx.execute(sql`select pg_advisory_xact_lock(${SETUP_LOCK_KEY})`);
}

/**
 * Inserts a user with an email+password credential account (better-auth's `credential` provider).
 * `emailVerified` (default false) only when ownership of the email was proven (issue #8).
 */
export async function insertUserWithPassword(
  tx: Executor,
  input: { name: string; email: string; passwordHash: string; emailVerified?: boolean },
): Promise<{ id: string; name: string; email: string }> {
  const id = newId('user');
  const [user] = await tx
    .insert(users)
    .values({ id, name: input.name, email: input.email, emailVerified: input.emailVerified ?? false })
    .returning({ id: users.id, name: users.name, email: users.email });
  // better-auth finds the credential account by providerId 'credential' and accountId = user id.
  await tx.insert(accounts).values({
    id: newId('account'),
    accountId: id,
    providerId: 'credential',
    userId: id,
    password: input.passwordHash,
  });
  return user!;
}

/** Inserts a team. */
export async function insertTeam(
  tx: Executor,
  input: { name: string; slug: string },
): Promise<{ id: string; name: string; slug: string }> {
  const [team] = await tx
    .insert(teams)
    .values({ id: newId('team'), name: input.name, slug: input.slug })
    .returning({ id: teams.id, name: teams.name, slug: teams.slug });
  return team!;
}

/** Inserts a membership row. */
export async function insertMember(
  tx: Executor,
  input: { teamId: string; userId: string; role: string },
): Promise<void> {
  await tx
    .insert(members)
    .values({ id: newId('member'), organizationId: input.teamId, userId: input.userId, role: input.role });
}

/** Changes `userId`'s role in `teamId` (the caller checked the member rules: member-rules.ts). */
export async function setMemberRole(
  db: Executor,
  teamId: string,
  userId: string,
  role: string,
): Promise<void> {
  await db
    .update(members)
    .set({ role })
    .where(and(eq(members.organizationId, teamId), eq(members.userId, userId)));
}

/** Removes `userId`'s membership of `teamId`. */
export async function deleteMember(db: Executor, teamId: string, userId: string): Promise<void> {
  await db.delete(members).where(and(eq(members.organizationId, teamId), eq(members.userId, userId)));
}

/** Points the user's sessions that were active in `teamId` at no team (their next request picks another). */
export async function clearActiveTeam(db: Executor, userId: string, teamId: string): Promise<void> {
  await db
    .update(sessions)
    .set({ activeOrganizationId: null, updatedAt: new Date() })
    .where(and(eq(sessions.userId, userId), eq(sessions.activeOrganizationId, teamId)));
}

/** Every team the user belongs to, oldest membership first. */
export async function listMemberships(db: Executor, userId: string): Promise<Membership[]> {
  return db
    .select({ teamId: teams.id, name: teams.name, slug: teams.slug, role: members.role })
    .from(members)
    .innerJoin(teams, eq(teams.id, members.organizationId))
    .where(eq(members.userId, userId))
    .orderBy(asc(members.createdAt), asc(members.id));
}

/** The user's membership of `teamId`, or null when they are not a member. */
export async function findMembership(
  db: Executor,
  userId: string,
  teamId: string,
): Promise<Membership | null> {
  const [row] = await db
    .select({ teamId: teams.id, name: teams.name, slug: teams.slug, role: members.role })
    .from(members)
    .innerJoin(teams, eq(teams.id, members.organizationId))
    .where(and(eq(members.userId, userId), eq(members.organizationId, teamId)))
    .limit(1);
  return row ?? null;
}

/** The id of the user's oldest membership's team, or null. */
export async function findFirstTeamId(db: Executor, userId: string): Promise<string | null> {
  const [row] = await db
    .select({ teamId: members.organizationId })
    .from(members)
    .where(eq(members.userId, userId))
    .orderBy(asc(members.createdAt), asc(members.id))
    .limit(1);
  return row?.teamId ?? null;
}

/** A user's id, name and email, or null. */
export async function findUserSummary(
  db: Executor,
  userId: string,
): Promise<{ id: string; name: string; email: string } | null> {
  const [row] = await db
    .select({ id: users.id, name: users.name, email: users.email })
    .from(users)
    .where(eq(users.id, userId))
    .limit(1);
  return row ?? null;
}

/** True when a user other than `userId` exists. */
export async function anotherUserExists(db: Executor, userId: string): Promise<boolean> {
  const rows = await db.select({ id: users.id }).from(users).where(ne(users.id, userId)).limit(1);
  return rows.length > 0;
}

/** Deletes a user; their accounts, sessions and memberships go with them (ON DELETE CASCADE). */
export async function deleteUser(db: Executor, userId: string): Promise<void> {
  await db.delete(users).where(eq(users.id, userId));
}

/** True when a team already uses `slug`. */
export async function teamSlugTaken(db: Executor, slug: string): Promise<boolean> {
  const rows = await db.select({ id: teams.id }).from(teams).where(eq(teams.slug, slug)).limit(1);
  return rows.length > 0;
}

/** Records that ownership of the user's email was proven (a provider's verified email). */
export async function markEmailVerified(db: Executor, userId: string): Promise<void> {
  await db.update(users).set({ emailVerified: true, updatedAt: new Date() }).where(eq(users.id, userId));
}

/**
 * Locks the user with `email` (case-insensitive) for the rest of the transaction `tx` and returns
 * their id, or null when none exists or their email is already verified.
 */
export async function lockUnverifiedUserByEmail(tx: Executor, email: string): Promise<string | null> {
  const [row] = await tx
    .select({ id: users.id })
    .from(users)
    .where(and(eq(sql`lower(${users.email})`, email.toLowerCase()), eq(users.emailVerified, false)))
    .limit(1)
    .for('update');
  return row?.id ?? null;
}

/**
 * Hands an account whose email was never verified to the person who just proved they own that
 * email through an identity provider (issue #8, verified-email-reclaim.ts): whoever set its
 * password is shut out. In `tx`: the password credential is removed, every session of the user is
 * deleted, and the email is marked verified. Memberships and other data stay with the account.
 */
export async function reclaimUnverifiedUser(tx: Executor, userId: string): Promise<void> {
  await tx.delete(accounts).where(and(eq(accounts.userId, userId), eq(accounts.providerId, 'credential')));
  await tx.delete(sessions).where(eq(sessions.userId, userId));
  await markEmailVerified(tx, userId);
}
