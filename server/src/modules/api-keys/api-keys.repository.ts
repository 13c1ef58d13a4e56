import { and, desc, eq, isNotNull, isNull, lt, or, type SQL } from 'drizzle-orm';
import type { Executor } from '../../db/client.ts';
import { apiKeys, members, users } from '../../db/schema/index.ts';

export type ApiKeyRow = typeof apiKeys.$inferSelect;

/** A key with who created it: the user's name and email (null once the account is deleted) and
 * whether they are still a member of the key's team. */
export interface ApiKeyWithCreator {
  key: ApiKeyRow;
  creatorName: string | null;
  creatorEmail: string | null;
  creatorIsMember: boolean;
}

/** Filters of the team's key list; `creatorStatus: 'removed'` also matches keys whose creator's account is gone. */
export interface ApiKeyFilter {
  id?: string | undefined;
  createdBy?: string | undefined;
  creatorStatus?: 'member' | 'removed' | undefined;
}

/** SQL for API keys; every query but the hash look-up is scoped by team. */
export const apiKeyRepository = {
  async insert(db: Executor, row: typeof apiKeys.$inferInsert): Promise<ApiKeyRow> {
    const [created] = await db.insert(apiKeys).values(row).returning();
    return created!;
  },
  /** The team's keys matching `filter`, newest first, each with its creator and their membership. */
  async listWithCreator(
    db: Executor,
    teamId: string,
    filter: ApiKeyFilter = {},
  ): Promise<ApiKeyWithCreator[]> {
    const conditions: SQL[] = [eq(apiKeys.teamId, teamId)];
    if (filter.id !== undefined) conditions.push(eq(apiKeys.id, filter.id));
    if (filter.createdBy !== undefined) conditions.push(eq(apiKeys.createdBy, filter.createdBy));
    if (filter.creatorStatus === 'member') conditions.push(isNotNull(members.id));
    if (filter.creatorStatus === 'removed') conditions.push(isNull(members.id));
    const rows = await db
      .select({ key: apiKeys, creatorName: users.name, creatorEmail: users.email, memberId: members.id })
      .from(apiKeys)
      .leftJoin(users, eq(users.id, apiKeys.createdBy))
      .leftJoin(
        members,
        and(eq(members.organizationId, apiKeys.teamId), eq(members.userId, apiKeys.createdBy)),
      )
      .where(and(...conditions))
      .orderBy(desc(apiKeys.createdAt));
    return rows.map(({ memberId, ...row }) => ({ ...row, creatorIsMember: memberId !== null }));
  },
  async findByHash(db: Executor, keyHash: string): Promise<ApiKeyRow | undefined> {
    const [row] = await db.select().from(apiKeys).where(eq(apiKeys.keyHash, keyHash));
    return row;
  },
  async update(
    db: Executor,
    teamId: string,
    id: string,
    changes: Partial<typeof apiKeys.$inferInsert>,
  ): Promise<ApiKeyRow | undefined> {
    const [row] = await db
      .update(apiKeys)
      .set({ ...changes, updatedAt: new Date() })
      .where(and(eq(apiKeys.teamId, teamId), eq(apiKeys.id, id)))
      .returning();
    return row;
  },
  async delete(db: Executor, teamId: string, id: string): Promise<boolean> {
    const rows = await db
      .delete(apiKeys)
      .where(and(eq(apiKeys.teamId, teamId), eq(apiKeys.id, id)))
      .returning({ id: apiKeys.id });
    return rows.length > 0;
  },
  /** Sets lastUsedAt = `at` unless it is already later than `unlessAfter`. */
  async touchLastUsed(db: Executor, id: string, at: Date, unlessAfter: Date): Promise<void> {
    await db
      .update(apiKeys)
      .set({ lastUsedAt: at })
      .where(and(eq(apiKeys.id, id), or(isNull(apiKeys.lastUsedAt), lt(apiKeys.lastUsedAt, unlessAfter))));
  },
};
