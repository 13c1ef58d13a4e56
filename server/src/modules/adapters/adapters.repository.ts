import { and, asc, desc, eq, like, ne, sql } from 'drizzle-orm';
import type { Executor } from '../../db/client.ts';
import { preparedPerExecutor } from '../../db/named-statement.ts';
import { nextRowVersion } from '../../db/row-version.ts';
import { adapters } from '../../db/schema/index.ts';

export type AdapterRow = typeof adapters.$inferSelect;

/** findMany's statement, prepared once per database (or transaction) it runs on. */
const findManyStatement = preparedPerExecutor((db) =>
  db
    .select()
    .from(adapters)
    .where(sql`${adapters.id} = any(${sql.placeholder('ids')}::text[])`)
    .prepare('adapters_find_many'),
);

/** SQL for adapters; every query is scoped by team. */
export const adapterRepository = {
  async insert(db: Executor, row: typeof adapters.$inferInsert): Promise<AdapterRow> {
    const [created] = await db.insert(adapters).values(row).returning();
    return created!;
  },
  listByTeam(db: Executor, teamId: string): Promise<AdapterRow[]> {
    return db.select().from(adapters).where(eq(adapters.teamId, teamId)).orderBy(desc(adapters.createdAt));
  },
  /** Any team's adapter by id: only for the provider-events route, which authenticates by the URL token. */
  async findById(db: Executor, id: string): Promise<AdapterRow | undefined> {
    const [row] = await db.select().from(adapters).where(eq(adapters.id, id));
    return row;
  },
  async findInTeam(db: Executor, teamId: string, id: string): Promise<AdapterRow | undefined> {
    const [row] = await db
      .select()
      .from(adapters)
      .where(and(eq(adapters.teamId, teamId), eq(adapters.id, id)));
    return row;
  },
  /** The adapters of `refs` that exist in their stated team (others are left out), in no order. */
  async findMany(db: Executor, refs: readonly { teamId: string; id: string }[]): Promise<AdapterRow[]> {
    if (refs.length === 0) return [];
    // Prepared once per database: the send worker reads each batch's adapters with it (session 22).
    const rows = await findManyStatement(db).execute({ ids: [...new Set(refs.map((ref) => ref.id))] });
    const wanted = new Set(refs.map((ref) => `${ref.teamId}/${ref.id}`));
    return rows.filter((row) => wanted.has(`${row.teamId}/${row.id}`));
  },
  /** The team's active adapters, default first, then oldest first. */
  activeByPreference(db: Executor, teamId: string): Promise<AdapterRow[]> {
    return db
      .select()
      .from(adapters)
      .where(and(eq(adapters.teamId, teamId), eq(adapters.isActive, true)))
      .orderBy(desc(adapters.isDefault), asc(adapters.createdAt))
      .limit(1);
  },
  async hasDefault(db: Executor, teamId: string): Promise<boolean> {
    const rows = await db
      .select({ id: adapters.id })
      .from(adapters)
      .where(and(eq(adapters.teamId, teamId), eq(adapters.isDefault, true)))
      .limit(1);
    return rows.length > 0;
  },
  /**
   * Serialises changes of a team's adapters for the rest of the transaction (advisory lock): default
   * changes (two concurrent requests cannot both make an adapter the default), fallback checks (no
   * cycle closed by two changes at once) and deletes (a fallback cannot be deleted between a
   * change's check and its write).
   */
  async lockTeamDefault(db: Executor, teamId: string): Promise<void> {
    await db.execute(sql`select pg_advisory_xact_lock(hashtext(${`adapters-default:${teamId}`}))`);
  },
  async clearDefault(db: Executor, teamId: string, exceptId: string): Promise<void> {
    await db
      .update(adapters)
      .set({ isDefault: false })
      .where(and(eq(adapters.teamId, teamId), eq(adapters.isDefault, true), ne(adapters.id, exceptId)));
  },
  async update(
    db: Executor,
    teamId: string,
    id: string,
    changes: Partial<typeof adapters.$inferInsert>,
  ): Promise<AdapterRow | undefined> {
    const [row] = await db
      .update(adapters)
      .set({ ...changes, updatedAt: nextRowVersion(adapters.updatedAt) })
      .where(and(eq(adapters.teamId, teamId), eq(adapters.id, id)))
      .returning();
    return row;
  },
  /**
   * Adapters of every team whose config is still in the v1 format (no associated data). The one
   * query not scoped by team: a start-up maintenance step, never reached from a request.
   */
  listLegacyEncrypted(db: Executor): Promise<Pick<AdapterRow, 'id' | 'teamId' | 'configEncrypted'>[]> {
    return db
      .select({ id: adapters.id, teamId: adapters.teamId, configEncrypted: adapters.configEncrypted })
      .from(adapters)
      .where(like(adapters.configEncrypted, 'v1:%'));
  },
  /**
   * Swaps a config's ciphertext for another of the same config, only while it is still `expected`
   * (another process may be doing the same); updatedAt stays, since the config did not change.
   */
  async replaceCiphertext(
    db: Executor,
    row: { teamId: string; id: string },
    expected: string,
    next: string,
  ): Promise<boolean> {
    const rows = await db
      .update(adapters)
      .set({ configEncrypted: next })
      .where(
        and(eq(adapters.teamId, row.teamId), eq(adapters.id, row.id), eq(adapters.configEncrypted, expected)),
      )
      .returning({ id: adapters.id });
    return rows.length > 0;
  },
  async delete(db: Executor, teamId: string, id: string): Promise<boolean> {
    const rows = await db
      .delete(adapters)
      .where(and(eq(adapters.teamId, teamId), eq(adapters.id, id)))
      .returning({ id: adapters.id });
    return rows.length > 0;
  },
};
