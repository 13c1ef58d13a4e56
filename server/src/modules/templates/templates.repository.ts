import { and, count, desc, eq, ilike, inArray, like, max, or, type SQL, sql } from 'drizzle-orm';
import type { Executor } from '../../db/client.ts';
import { containsPattern } from '../../db/like-pattern.ts';
import { emailLogs, templates, templateVersions } from '../../db/schema/index.ts';
import { hasIdPrefix } from '../../ids.ts';

export type TemplateRow = typeof templates.$inferSelect;
export type TemplateVersionRow = typeof templateVersions.$inferSelect;

/** The columns of a template list item (templates.service `presentTemplateListItem`). */
const TEMPLATE_LIST_COLUMNS = {
  id: templates.id,
  name: templates.name,
  slug: templates.slug,
  description: templates.description,
  subject: templates.subject,
  isActive: templates.isActive,
  generatePdf: templates.generatePdf,
  variables: templates.variables,
  teamId: templates.teamId,
  thumbnailKey: templates.thumbnailKey,
  createdAt: templates.createdAt,
  updatedAt: templates.updatedAt,
};

/** A template as a list shows it. */
export type TemplateListRow = Pick<TemplateRow, keyof typeof TEMPLATE_LIST_COLUMNS>;

/** The columns of a version list item (spec "Templates (session)": id, name, createdBy, createdAt). */
const VERSION_LIST_COLUMNS = {
  id: templateVersions.id,
  name: templateVersions.name,
  createdBy: templateVersions.createdBy,
  createdAt: templateVersions.createdAt,
};
export type TemplateVersionListRow = Pick<TemplateVersionRow, keyof typeof VERSION_LIST_COLUMNS>;

/** SQL for templates and their versions; every query is scoped by team. */
export const templateRepository = {
  async insert(db: Executor, row: typeof templates.$inferInsert): Promise<TemplateRow> {
    const [created] = await db.insert(templates).values(row).returning();
    return created!;
  },

  /**
   * A template by id (`tpl_…`) or slug within the team. `lock: 'update'` locks the row until the
   * transaction ends (edits, version numbering and restore serialise on it).
   */
  async findByIdOrSlug(
    db: Executor,
    teamId: string,
    idOrSlug: string,
    options: { lock?: 'update' | 'share' } = {},
  ): Promise<TemplateRow | undefined> {
    const key = hasIdPrefix(idOrSlug, 'template') ? eq(templates.id, idOrSlug) : eq(templates.slug, idOrSlug);
    const query = db
      .select()
      .from(templates)
      .where(and(eq(templates.teamId, teamId), key));
    const [row] = options.lock ? await query.for(options.lock) : await query;
    return row;
  },

  /**
   * A page of the team's templates with only the columns a list shows ({@link TemplateListRow}):
   * not the design and compiled HTML, megabytes a row at worst, which every row of a page read,
   * parsed and dropped (review finding, session 12).
   */
  async list(
    db: Executor,
    teamId: string,
    query: { page: number; pageSize: number; search?: string | undefined; isActive?: boolean | undefined },
  ): Promise<{ rows: TemplateListRow[]; total: number }> {
    const conditions: SQL[] = [eq(templates.teamId, teamId)];
    if (query.search) {
      const pattern = containsPattern(query.search);
      conditions.push(or(ilike(templates.name, pattern), ilike(templates.slug, pattern))!);
    }
    if (query.isActive !== undefined) conditions.push(eq(templates.isActive, query.isActive));
    const where = and(...conditions);
    const [rows, totals] = await Promise.all([
      db
        .select(TEMPLATE_LIST_COLUMNS)
        .from(templates)
        .where(where)
        .orderBy(desc(templates.createdAt), desc(templates.id))
        .limit(query.pageSize)
        .offset((query.page - 1) * query.pageSize),
      db.select({ total: count() }).from(templates).where(where),
    ]);
    return { rows, total: totals[0]?.total ?? 0 };
  },

  /** Slugs in the team equal to `base` or starting with `base-` (to pick a free one). */
  async slugsLike(db: Executor, teamId: string, base: string): Promise<Set<string>> {
    const rows = await db
      .select({ slug: templates.slug })
      .from(templates)
      .where(
        and(eq(templates.teamId, teamId), or(eq(templates.slug, base), like(templates.slug, `${base}-%`))),
      );
    return new Set(rows.map((r) => r.slug));
  },

  async update(
    db: Executor,
    teamId: string,
    id: string,
    changes: Partial<typeof templates.$inferInsert>,
  ): Promise<TemplateRow | undefined> {
    const [row] = await db
      .update(templates)
      .set({ ...changes, updatedAt: new Date() })
      .where(and(eq(templates.teamId, teamId), eq(templates.id, id)))
      .returning();
    return row;
  },

  /** Makes `versionId` the template's current version (its content is then fully versioned). */
  async setCurrentVersion(db: Executor, teamId: string, id: string, versionId: string): Promise<void> {
    await db
      .update(templates)
      .set({ currentVersionId: versionId, hasUnversionedChanges: false })
      .where(and(eq(templates.teamId, teamId), eq(templates.id, id)));
  },

  /**
   * Claims the snapshot of a template's unversioned changes: clears the flag only if it is still
   * as `template` read it, so of concurrent sends exactly one gets the row back and snapshots.
   */
  async claimUnversionedChanges(db: Executor, template: TemplateRow): Promise<TemplateRow | undefined> {
    const [row] = await db
      .update(templates)
      .set({ hasUnversionedChanges: false })
      .where(
        and(
          eq(templates.teamId, template.teamId),
          eq(templates.id, template.id),
          eq(templates.hasUnversionedChanges, template.hasUnversionedChanges),
        ),
      )
      .returning();
    return row;
  },

  /**
   * Deletes template `id` of the team with its versions that no email log names; the versions a log
   * names stay (their template_id set null) so the log still re-renders (review finding "growth":
   * every version of a deleted template stayed, unreachable, up to 2 MB of design each). Run it in
   * a transaction: the template row is locked first (FOR UPDATE), which waits for the sends whose
   * log names the template and is not committed yet (their foreign key check holds a KEY SHARE
   * lock on it), and makes later ones wait, then fail that check once the template is gone. So the
   * versions' check below sees every log that will ever name the template's versions. The check
   * reads the template's logs by email_logs_template_id_idx.
   * @returns whether the template existed (and is now deleted).
   */
  async delete(tx: Executor, teamId: string, id: string): Promise<boolean> {
    const where = and(eq(templates.teamId, teamId), eq(templates.id, id));
    const [locked] = await tx.select({ id: templates.id }).from(templates).where(where).for('update');
    if (!locked) return false;
    await tx.execute(sql`
      delete from ${templateVersions} v
      where v.team_id = ${teamId} and v.template_id = ${id}
        and not exists (
          select 1 from ${emailLogs} l where l.template_id = ${id} and l.template_version_id = v.id)`);
    const rows = await tx.delete(templates).where(where).returning({ id: templates.id });
    return rows.length > 0;
  },

  async insertVersion(db: Executor, row: typeof templateVersions.$inferInsert): Promise<TemplateVersionRow> {
    const [created] = await db.insert(templateVersions).values(row).returning();
    return created!;
  },

  async nextVersionNumber(db: Executor, templateId: string): Promise<number> {
    const [row] = await db
      .select({ highest: max(templateVersions.number) })
      .from(templateVersions)
      .where(eq(templateVersions.templateId, templateId));
    return (row?.highest ?? 0) + 1;
  },

  /**
   * Sets the thumbnail of template `id` to storage key `key` if its compiled HTML is still
   * `compiledHtml` (the HTML the screenshot was taken of).
   * @returns the thumbnail it replaced (the column's value: a key, '' or a URL from before migration
   *   0018), as the row held it when this statement locked it (not as read before the screenshot: a
   *   job that finished meanwhile set its own, which is the one replaced now; FOR UPDATE in the
   *   subquery waits for a concurrent change and reads its result); undefined when the HTML changed
   *   or the template is gone.
   */
  async setThumbnailIfUnchanged(
    db: Executor,
    teamId: string,
    id: string,
    compiledHtml: string,
    key: string,
  ): Promise<{ previous: string } | undefined> {
    const { rows } = (await db.execute(sql`update ${templates} t set thumbnail_url = ${key}
      from (select id, thumbnail_url from ${templates}
        where id = ${id} and team_id = ${teamId} for update) previous
      where t.id = previous.id and t.compiled_html = ${compiledHtml}
      returning previous.thumbnail_url as "previous"`)) as unknown as { rows: { previous: string }[] };
    return rows[0];
  },

  /**
   * Whether a template of team `teamId` still shows the thumbnail stored under `key`: holds the key,
   * or a URL from before migration 0018 whose path ends with it (templates.thumbnail.ts
   * thumbnailKeyOf). Thumbnail keys are under their team's prefix and duplicates stay in their
   * team, so other teams' templates never hold one.
   */
  async isThumbnailShown(db: Executor, teamId: string, key: string): Promise<boolean> {
    const [row] = await db
      .select({ id: templates.id })
      .from(templates)
      .where(
        and(
          eq(templates.teamId, teamId),
          or(
            eq(templates.thumbnailKey, key),
            sql`right(${templates.thumbnailKey}, ${key.length + 1}) = ${`/${key}`}`,
          ),
        ),
      )
      .limit(1);
    return row !== undefined;
  },

  /**
   * The template's versions, newest first: the columns the list shows only ({@link
   * VERSION_LIST_COLUMNS}), never the designs (each up to 2 MB; a template with 60 versions of such
   * a design made one list request hold ~90 MB, review finding, session 14).
   */
  listVersions(
    db: Executor,
    teamId: string,
    templateId: string,
    limit: number,
  ): Promise<TemplateVersionListRow[]> {
    return db
      .select(VERSION_LIST_COLUMNS)
      .from(templateVersions)
      .where(and(eq(templateVersions.teamId, teamId), eq(templateVersions.templateId, templateId)))
      .orderBy(desc(templateVersions.number), desc(templateVersions.createdAt))
      .limit(limit);
  },

  async findVersion(
    db: Executor,
    teamId: string,
    versionId: string,
  ): Promise<TemplateVersionRow | undefined> {
    const [row] = await db
      .select()
      .from(templateVersions)
      .where(and(eq(templateVersions.teamId, teamId), eq(templateVersions.id, versionId)));
    return row;
  },

  /** The versions of `refs` that exist in their stated team (others are left out), in no order. */
  async findVersions(
    db: Executor,
    refs: readonly { teamId: string; id: string }[],
  ): Promise<TemplateVersionRow[]> {
    if (refs.length === 0) return [];
    const rows = await db
      .select()
      .from(templateVersions)
      .where(inArray(templateVersions.id, [...new Set(refs.map((ref) => ref.id))]));
    const wanted = new Set(refs.map((ref) => `${ref.teamId}/${ref.id}`));
    return rows.filter((row) => wanted.has(`${row.teamId}/${row.id}`));
  },
};
