import type { Database, Executor } from '../../db/client.ts';
import { notFound } from '../../http/errors.ts';
import { type TemplateRow, type TemplateVersionListRow, templateRepository } from './templates.repository.ts';
import type { TemplateVersionView } from './templates.schema.ts';
import type { TemplateSendCache } from './templates.send-cache.ts';
import { compileContent, getTemplate, snapshotVersion } from './templates.service.ts';
import { enqueueThumbnail, type ThumbnailQueue } from './templates.thumbnail.ts';

/** Version names are 1-100 characters, like template names (spec "Limits"). */
const MAX_VERSION_NAME = 100;

/** Spec "Template version": {id, name, createdBy, createdAt}; the snapshot's content stays inside. */
export function presentVersion(row: TemplateVersionListRow): TemplateVersionView {
  return {
    id: row.id,
    name: row.name,
    createdBy: row.createdBy,
    createdAt: row.createdAt.toISOString(),
  };
}

/** The template (id or slug) locked for the rest of the transaction. @throws NOT_FOUND. */
async function lockTemplate(tx: Executor, teamId: string, idOrSlug: string): Promise<TemplateRow> {
  const row = await templateRepository.findByIdOrSlug(tx, teamId, idOrSlug, { lock: 'update' });
  if (!row) throw notFound('Template');
  return row;
}

/** Versions `GET /api/templates/:id/versions` answers by default, and at most (`limit`). */
export const DEFAULT_VERSIONS_LIMIT = 100;
export const MAX_VERSIONS_LIMIT = 1000;

/**
 * The newest `limit` versions of a template (id or slug), newest first (spec "Templates (session)":
 * an array; the bound is the deliveries list's, issue #11: a template with 100,000 versions answered
 * 18.6 MB in one array, review finding, session 16).
 * @throws NOT_FOUND when the team has no such template.
 */
export async function listVersions(
  db: Executor,
  teamId: string,
  idOrSlug: string,
  limit: number = DEFAULT_VERSIONS_LIMIT,
): Promise<TemplateVersionView[]> {
  const template = await getTemplate(db, teamId, idOrSlug);
  const rows = await templateRepository.listVersions(db, teamId, template.id, limit);
  return rows.map(presentVersion);
}

/**
 * Snapshots the template's current content as a new version named `name` or "Version N"
 * (N = its number) and makes it currentVersionId (spec "Versioning" 2, issue #4 "Versions").
 * Returns the new version.
 * @throws NOT_FOUND when the team has no such template.
 */
export async function createVersion(
  db: Database,
  sendCache: TemplateSendCache,
  teamId: string,
  userId: string | null,
  idOrSlug: string,
  name?: string,
): Promise<TemplateVersionView> {
  const version = await db.transaction(async (tx) => {
    const template = await lockTemplate(tx, teamId, idOrSlug);
    return presentVersion(await snapshotVersion(tx, template, userId, name));
  });
  sendCache.forgetTeam(teamId);
  return version;
}

/**
 * Puts a version's name, subject, design and PDF settings back on its template (variables and
 * compiledHtml recomputed), then records a new version "Restored from <version name>" that
 * becomes current (issue #4 "Versions"). The restored version itself is left as it was:
 * versions are immutable. Returns the updated template row.
 * @throws NOT_FOUND for an unknown template, or a version unknown or of another template;
 *   INVALID_TEMPLATE when the snapshot no longer passes the renderer's limits.
 */
export async function restoreVersion(
  db: Database,
  sendCache: TemplateSendCache,
  teamId: string,
  userId: string | null,
  idOrSlug: string,
  versionId: string,
  thumbnails?: ThumbnailQueue,
): Promise<TemplateRow> {
  const template = await getTemplate(db, teamId, idOrSlug);
  const version = await templateRepository.findVersion(db, teamId, versionId);
  if (!version || version.templateId !== template.id) throw notFound('Template version');
  const content = await compileContent(version.subject, version.designJson);
  const result = await db.transaction(async (tx) => {
    const locked = await lockTemplate(tx, teamId, template.id);
    const restored = await templateRepository.update(tx, teamId, locked.id, {
      name: version.templateName,
      subject: version.subject,
      designJson: content.design,
      variables: content.variables,
      compiledHtml: content.compiledHtml,
      generatePdf: version.generatePdf,
      pdfFilename: version.pdfFilename,
      trackOpens: version.trackOpens,
      trackClicks: version.trackClicks,
    });
    if (!restored) throw notFound('Template');
    if (restored.compiledHtml !== locked.compiledHtml) await enqueueThumbnail(thumbnails, tx, restored);
    const name = `Restored from ${version.name}`.slice(0, MAX_VERSION_NAME);
    const snapshot = await snapshotVersion(tx, restored, userId, name);
    return { ...restored, currentVersionId: snapshot.id, hasUnversionedChanges: false };
  });
  sendCache.forgetTeam(teamId);
  return result;
}
