import { and, desc, eq } from 'drizzle-orm';
import type { Executor } from '../../db/client.ts';
import { apiKeys } from '../../db/schema/index.ts';

export type ApiKeyRow = typeof apiKeys.$inferSelect;

/** SQL for API keys; every query but the hash look-up is scoped by team. */
export const apiKeyRepository = {
  async insert(db: Executor, row: typeof apiKeys.$inferInsert): Promise<ApiKeyRow> {
    const [created] = await db.insert(apiKeys).values(row).returning();
    return created!;
  },
  listByTeam(db: Executor, teamId: string): Promise<ApiKeyRow[]> {
    return db.select().from(apiKeys).where(eq(apiKeys.teamId, teamId)).orderBy(desc(apiKeys.createdAt));
  },
  async findInTeam(db: Executor, teamId: string, id: string): Promise<ApiKeyRow | undefined> {
    const [row] = await db
      .select()
      .from(apiKeys)
      .where(and(eq(apiKeys.teamId, teamId), eq(apiKeys.id, id)));
    return row;
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
  async touchLastUsed(db: Executor, id: string, at: Date): Promise<void> {
    await db.update(apiKeys).set({ lastUsedAt: at }).where(eq(apiKeys.id, id));
  },
};
