import type { Database, Executor } from '../../db/client.ts';
import { isUniqueViolation } from '../../db/errors.ts';
import type { templates } from '../../db/schema/index.ts';
import { jsonValueCount } from '../../heap-weight.ts';
import { type Page, page } from '../../http/envelope.ts';
import { AppError, notFound } from '../../http/errors.ts';
import { newId } from '../../ids.ts';
import { firstFreeSlug, slugify } from '../../slug.ts';
import {
  compileDesignHtml,
  compileTemplate,
  type EmailDesign,
  invalidTemplate,
  parseDesign,
} from '../rendering/index.ts';
import type { FileStorage } from '../storage/index.ts';
import {
  type TemplateListRow,
  type TemplateRow,
  type TemplateVersionRow,
  templateRepository,
} from './templates.repository.ts';
import type { CreateTemplateInput, TemplateView, UpdateTemplateInput } from './templates.schema.ts';
import type { TemplateSendCache } from './templates.send-cache.ts';
import { enqueueThumbnail, type ThumbnailQueue, thumbnailUrlOf } from './templates.thumbnail.ts';

/**
 * List item shape (spec "Template": list items carry …). `thumbnailUrl` is built from the stored
 * thumbnail key with `storage` as configured now (templates.thumbnail.ts thumbnailUrlOf).
 */
export function presentTemplateListItem(row: TemplateListRow, storage: FileStorage) {
  return {
    id: row.id,
    name: row.name,
    slug: row.slug,
    description: row.description,
    subject: row.subject,
    isActive: row.isActive,
    generatePdf: row.generatePdf,
    variables: row.variables,
    thumbnailUrl: thumbnailUrlOf(storage, row.teamId, row.thumbnailKey),
    createdAt: row.createdAt.toISOString(),
    updatedAt: row.updatedAt.toISOString(),
  };
}

/** Full template shape (spec "Template", get-one); `storage` as for {@link presentTemplateListItem}. */
export function presentTemplate(row: TemplateRow, storage: FileStorage): TemplateView {
  return {
    ...presentTemplateListItem(row, storage),
    teamId: row.teamId,
    designJson: row.designJson as Record<string, unknown>,
    compiledHtml: row.compiledHtml,
    currentVersionId: row.currentVersionId,
    pdfFilename: row.pdfFilename,
    trackOpens: row.trackOpens,
    trackClicks: row.trackClicks,
    createdBy: row.createdBy,
  };
}

/** What is stored with a template's subject and design, derived from them by {@link compileContent}. */
export interface CompiledContent {
  design: EmailDesign;
  variables: string[];
  compiledHtml: string;
}

/**
 * The largest design a template may store, in bytes of JSON (review finding, session 12): blocks
 * keep keys the schema does not know (the builder's own, kept for it), so only the 10 MB body limit
 * bounded a design, and each save stored it twice (template and version) and every list and
 * render read it back. EmailBuilder's sample documents are 3-32 KB; 2 MB leaves room for the
 * 1,000,000 characters of Liquid a template may hold.
 */
export const DESIGN_MAX_BYTES = 2 * 1024 * 1024;

/**
 * Most JSON values (objects, arrays, strings, numbers, booleans, nulls) in a template's design:
 * 2 MB of `[{},{},…]` under a key the builder keeps parsed into 43 MB on the heap, in every
 * process that loads the template to send or render it (review finding, session 13). EmailBuilder's
 * sample documents hold 97-1,120 values (about 35 per KB); this leaves room for designs of about
 * 3 MB of such JSON, and bounds one parsed design to a few MB.
 */
export const DESIGN_MAX_VALUES = 100_000;

/**
 * Validates subject + design and derives what is stored with them: the parsed design, its
 * variables and its HTML with Liquid left in place. The template is also rendered once without
 * variables, so one that exceeds a rendering limit on its own (a `(1..100000000)` loop, a string
 * doubled until it is huge) is refused when saved rather than at its first send (issue #4
 * "Hostile input is refused fast … at save and preview"). Other render errors depend on the
 * variables and surface at preview and send.
 * @throws INVALID_TEMPLATE (400), details.reason INVALID_DESIGN, SYNTAX_ERROR or LIMIT_EXCEEDED
 *   (also past {@link DESIGN_MAX_BYTES} or {@link DESIGN_MAX_VALUES}), with details.issues.
 */
export async function compileContent(subject: string, designJson: unknown): Promise<CompiledContent> {
  const bytes = Buffer.byteLength(JSON.stringify(designJson) ?? '');
  if (bytes > DESIGN_MAX_BYTES) {
    throw invalidTemplate('LIMIT_EXCEEDED', [
      { path: 'designJson', message: `The design exceeds ${DESIGN_MAX_BYTES} bytes of JSON (${bytes})` },
    ]);
  }
  const values = jsonValueCount(designJson, DESIGN_MAX_VALUES);
  if (values > DESIGN_MAX_VALUES) {
    throw invalidTemplate('LIMIT_EXCEEDED', [
      { path: 'designJson', message: `The design holds more than ${DESIGN_MAX_VALUES} JSON values` },
    ]);
  }
  const design = parseDesign(designJson);
  const compiled = compileTemplate({ subject, designJson: design });
  try {
    await compiled.render({});
  } catch (error) {
    if (error instanceof AppError && error.details.reason === 'LIMIT_EXCEEDED') throw error;
  }
  return { design, variables: compiled.variables, compiledHtml: compileDesignHtml(design) };
}

/** 409 ALREADY_EXISTS for a slug another template of the team holds. */
export function slugTaken(slug: string): AppError {
  return new AppError('ALREADY_EXISTS', `A template with slug "${slug}" already exists`, {
    field: 'slug',
    slug,
  });
}

/**
 * Inserts an immutable snapshot of `template`'s versioned content (name, subject, design, PDF
 * and tracking settings), named `name` or "Version N" (N = its number), and makes it the template's
 * currentVersionId with hasUnversionedChanges false (spec "Versioning" 2). Call inside a
 * transaction that holds the template row (numbers are max + 1).
 */
export async function snapshotVersion(
  tx: Executor,
  template: TemplateRow,
  userId: string | null,
  name?: string,
): Promise<TemplateVersionRow> {
  const number = await templateRepository.nextVersionNumber(tx, template.id);
  const version = await templateRepository.insertVersion(tx, {
    id: newId('templateVersion'),
    teamId: template.teamId,
    templateId: template.id,
    number,
    name: name ?? `Version ${number}`,
    templateName: template.name,
    subject: template.subject,
    designJson: template.designJson,
    generatePdf: template.generatePdf,
    pdfFilename: template.pdfFilename,
    trackOpens: template.trackOpens,
    trackClicks: template.trackClicks,
    createdBy: userId,
  });
  await templateRepository.setCurrentVersion(tx, template.teamId, template.id, version.id);
  return version;
}

/**
 * Tries at a server-chosen slug (a create without one, a duplicate) before a conflict with
 * concurrent requests taking the same slugs is answered 409 ALREADY_EXISTS.
 */
const GENERATED_SLUG_TRIES = 20;

/**
 * Runs `create` in a transaction until it commits without taking a slug another request took
 * meanwhile. `create` gets `slugFor(base)`: `fixedSlug` when given (a conflict is then answered at
 * once), else the first free of `base`, `base-2`, … as the transaction sees them (a generated slug
 * can lose a race with a concurrent create of the same name: the next try picks the next one).
 * @throws ALREADY_EXISTS (409) for a taken `fixedSlug`, or after GENERATED_SLUG_TRIES conflicts;
 *   whatever `create` throws otherwise.
 */
export async function withFreeSlug<T>(
  db: Database,
  teamId: string,
  fixedSlug: string | undefined,
  create: (tx: Executor, slugFor: (base: string) => Promise<string>) => Promise<T>,
): Promise<T> {
  for (let attempt = 1; ; attempt++) {
    let chosen: string | undefined;
    try {
      return await db.transaction((tx) =>
        create(tx, async (base) => {
          chosen = fixedSlug ?? firstFreeSlug(base, await templateRepository.slugsLike(tx, teamId, base));
          return chosen;
        }),
      );
    } catch (error) {
      if (!isUniqueViolation(error) || chosen === undefined) throw error;
      if (fixedSlug !== undefined || attempt >= GENERATED_SLUG_TRIES) throw slugTaken(chosen);
    }
  }
}

/**
 * Creates a template and its first version ("Version 1"), returned as stored (currentVersionId
 * set). The slug is generated from the name when absent (first free of `slug`, `slug-2`, …).
 * @throws INVALID_TEMPLATE for a bad design or subject, ALREADY_EXISTS (409) for a taken slug.
 */
export async function createTemplate(
  db: Database,
  teamId: string,
  userId: string | null,
  input: CreateTemplateInput,
  thumbnails?: ThumbnailQueue,
): Promise<TemplateRow> {
  const { design, variables, compiledHtml } = await compileContent(input.subject, input.designJson);
  return withFreeSlug(db, teamId, input.slug, async (tx, slugFor) => {
    const row = await templateRepository.insert(tx, {
      id: newId('template'),
      teamId,
      name: input.name,
      slug: await slugFor(slugify(input.name, 'template')),
      description: input.description ?? '',
      subject: input.subject,
      designJson: design,
      compiledHtml,
      variables,
      generatePdf: input.generatePdf ?? false,
      pdfFilename: input.pdfFilename ?? null,
      trackOpens: input.trackOpens ?? false,
      trackClicks: input.trackClicks ?? false,
      createdBy: userId,
    });
    const version = await snapshotVersion(tx, row, userId);
    await enqueueThumbnail(thumbnails, tx, row);
    return { ...row, currentVersionId: version.id };
  });
}

/** @throws NOT_FOUND when no template of the team has this id or slug. */
export async function getTemplate(db: Executor, teamId: string, idOrSlug: string): Promise<TemplateRow> {
  const row = await templateRepository.findByIdOrSlug(db, teamId, idOrSlug);
  if (!row) throw notFound('Template');
  return row;
}

/**
 * Paginated list, newest first; `search` matches name or slug case-insensitively. Thumbnail URLs
 * are built with `storage` ({@link presentTemplateListItem}).
 */
export async function listTemplates(
  db: Executor,
  storage: FileStorage,
  teamId: string,
  query: { page: number; pageSize: number; search?: string | undefined; isActive?: boolean | undefined },
): Promise<Page<ReturnType<typeof presentTemplateListItem>>> {
  const { rows, total } = await templateRepository.list(db, teamId, query);
  return page(
    rows.map((row) => presentTemplateListItem(row, storage)),
    total,
    query.page,
    query.pageSize,
  );
}

const VERSIONED_FIELDS = [
  'name',
  'subject',
  'designJson',
  'generatePdf',
  'pdfFilename',
  'trackOpens',
  'trackClicks',
] as const;

/**
 * Updates a template found by id or slug. A change to versioned content (name, subject, design,
 * PDF and tracking settings) marks it as having unversioned changes: the next send snapshots a version.
 * @throws NOT_FOUND, INVALID_TEMPLATE, ALREADY_EXISTS (slug taken).
 */
export async function updateTemplate(
  db: Database,
  sendCache: TemplateSendCache,
  teamId: string,
  idOrSlug: string,
  input: UpdateTemplateInput,
  thumbnails?: ThumbnailQueue,
): Promise<TemplateRow> {
  try {
    const updated = await db.transaction(async (tx) => {
      // Locked, so a concurrent edit cannot be overwritten with content compiled from a stale read.
      const current = await templateRepository.findByIdOrSlug(tx, teamId, idOrSlug, { lock: 'update' });
      if (!current) throw notFound('Template');
      const { designJson, ...rest } = input;
      const changes: Partial<typeof templates.$inferInsert> = Object.fromEntries(
        Object.entries(rest).filter(([, value]) => value !== undefined),
      );
      if (designJson !== undefined || input.subject !== undefined) {
        const compiled = await compileContent(
          input.subject ?? current.subject,
          designJson ?? current.designJson,
        );
        Object.assign(changes, { variables: compiled.variables, compiledHtml: compiled.compiledHtml });
        if (designJson !== undefined) changes.designJson = compiled.design;
      }
      if (VERSIONED_FIELDS.some((field) => input[field] !== undefined)) changes.hasUnversionedChanges = true;
      const row = await templateRepository.update(tx, teamId, current.id, changes);
      if (!row) throw notFound('Template');
      if (changes.compiledHtml !== undefined && changes.compiledHtml !== current.compiledHtml) {
        await enqueueThumbnail(thumbnails, tx, row);
      }
      return row;
    });
    sendCache.forgetTeam(teamId);
    return updated;
  } catch (error) {
    if (isUniqueViolation(error)) throw slugTaken(input.slug ?? '');
    throw error;
  }
}

/**
 * Permanent delete; email logs keep templateName and get templateId null. The template's versions
 * go too, except those an email log names, which stay so the log can be re-rendered (one transaction,
 * see templateRepository.delete). Returns the deleted template's stored thumbnail (its key, '' when
 * it had none, or a URL from before migration 0018) so the caller can release the file
 * (`releaseThumbnail`). @throws NOT_FOUND.
 */
export async function deleteTemplate(
  db: Executor,
  sendCache: TemplateSendCache,
  teamId: string,
  idOrSlug: string,
): Promise<{ thumbnailKey: string }> {
  const current = await getTemplate(db, teamId, idOrSlug);
  await db.transaction((tx) => templateRepository.delete(tx, teamId, current.id));
  sendCache.forgetTeam(teamId);
  return { thumbnailKey: current.thumbnailKey };
}

/**
 * The template and the immutable version a send renders from. Reads without a transaction; when
 * the content changed since the current version it snapshots one first, in a short transaction of
 * its own (issue #4: a log can always be re-rendered exactly); concurrent sends agree on one
 * snapshot. No lock is held for the send: a template deleted before the send commits makes the
 * log's insert fail its foreign key (the send answers INVALID_TEMPLATE), and the version it names
 * is immutable and outlives its template (template_versions.template_id ON DELETE SET NULL).
 * @throws INVALID_TEMPLATE (400) when the template does not exist in the team or is inactive.
 */
export async function resolveTemplateForSend(
  db: Database,
  teamId: string,
  idOrSlug: string,
): Promise<{ template: TemplateRow; version: TemplateVersionRow }> {
  const template = await templateRepository.findByIdOrSlug(db, teamId, idOrSlug);
  if (!template)
    throw new AppError('INVALID_TEMPLATE', `Template "${idOrSlug}" not found`, { templateId: idOrSlug });
  if (!template.isActive) {
    throw new AppError('INVALID_TEMPLATE', `Template "${template.slug}" is inactive`, {
      templateId: template.id,
    });
  }
  if (template.hasUnversionedChanges || !template.currentVersionId) {
    const snapshot = await db.transaction(async (tx) => {
      const claimed = await templateRepository.claimUnversionedChanges(tx, template);
      return claimed ? { template: claimed, version: await snapshotVersion(tx, claimed, null) } : undefined;
    });
    return snapshot ?? resolveTemplateForSend(db, teamId, template.id);
  }
  const version = await templateRepository.findVersion(db, teamId, template.currentVersionId);
  if (!version)
    throw new Error(`template ${template.id} points at missing version ${template.currentVersionId}`);
  return { template, version };
}

/**
 * {@link resolveTemplateForSend} through the context's `sendCache` (issue #9
 * "Cheap hot path"): no database round trip on a hit, changes through another process seen within
 * TEMPLATE_SEND_CACHE_TTL_MS. The result is shared: read-only.
 * @throws INVALID_TEMPLATE (400) as resolveTemplateForSend (errors are not cached).
 */
export function cachedTemplateForSend(
  db: Database,
  sendCache: TemplateSendCache,
  teamId: string,
  idOrSlug: string,
): Promise<{ template: TemplateRow; version: TemplateVersionRow }> {
  return sendCache.get(teamId, idOrSlug, () => resolveTemplateForSend(db, teamId, idOrSlug));
}

/** A version by id within the team (the worker renders from it). */
/**
 * The versions `refs` name, each only if it exists in its stated team, by id (one query; the
 * worker loads a whole batch's versions at once). Versions are immutable, so callers may cache them.
 */
export async function findTemplateVersions(
  db: Executor,
  refs: readonly { teamId: string; id: string }[],
): Promise<Map<string, TemplateVersionRow>> {
  return new Map((await templateRepository.findVersions(db, refs)).map((row) => [row.id, row]));
}

export async function getTemplateVersion(
  db: Executor,
  teamId: string,
  versionId: string,
): Promise<TemplateVersionRow> {
  const version = await templateRepository.findVersion(db, teamId, versionId);
  if (!version) throw notFound('Template version');
  return version;
}
