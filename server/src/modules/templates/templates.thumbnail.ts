import { createHash } from 'node:crypto';
import { eq, sql } from 'drizzle-orm';
import type { Database, Executor } from '../../db/client.ts';
import { templates } from '../../db/schema/index.ts';
import { newJobId } from '../../ids.ts';
import { type JobPayload, TEMPLATE_THUMBNAIL_JOB } from '../../jobs/definitions.ts';
import type { JobQueue, QueuedJob } from '../../jobs/queue.ts';
import type { JobHandlers } from '../../jobs/registry.ts';
import type { PdfRenderer } from '../pdf/index.ts';
import type { FileStorage } from '../storage/index.ts';
import { templateRepository } from './templates.repository.ts';

/** The viewport a thumbnail is taken in (CSS pixels): an email's usual 600 px width, a screen high. */
export const THUMBNAIL_VIEWPORT = { width: 600, height: 800 } as const;

/**
 * Where template saves enqueue their thumbnail (issue #12): the queue when this process has a PDF
 * renderer, undefined otherwise (then no job is queued and `thumbnailUrl` stays as it is).
 */
export type ThumbnailQueue = JobQueue | undefined;

/**
 * Enqueues the `template.thumbnail` job of `template` inside `tx` (it runs only if the save
 * commits). The screenshot is taken by a worker, never in the request: a failing renderer cannot
 * slow or fail a save.
 */
export async function enqueueThumbnail(
  queue: ThumbnailQueue,
  tx: Executor,
  template: { id: string; teamId: string },
): Promise<void> {
  if (!queue) return;
  await queue.enqueue(
    tx,
    TEMPLATE_THUMBNAIL_JOB,
    { templateId: template.id, teamId: template.teamId },
    newJobId().uuid,
  );
}

/** What the thumbnail handler uses: the database, the renderer (may be absent) and file storage. */
export interface ThumbnailDeps {
  db: Database;
  pdf: PdfRenderer | undefined;
  storage: FileStorage;
}

/**
 * The `template.thumbnail` handler (issue #12): a PNG screenshot of the template's compiled HTML
 * (its design, Liquid placeholders as written) in a {@link THUMBNAIL_VIEWPORT} through the
 * renderer's Gotenberg `screenshot/html` route, stored under
 * `<teamId>/thumbnails/<templateId>-<sha256 prefix>.png` and set as the template's `thumbnailUrl`
 * — only if the template still has the HTML that was captured (a later save's own job wins; the
 * file just stored is then deleted again unless a template shows it). The thumbnail it replaces
 * (the row's as the update found it, so overlapping jobs each release the one they replaced) is
 * then deleted from storage unless another template (a duplicate) still shows it
 * ({@link releaseThumbnail}; review findings, session 14: both files were left behind for good). Nothing happens for a template deleted meanwhile, without a renderer or with unconfigured S3.
 * A render or storage failure throws: the queue retries (definitions.ts); the template is unaffected.
 */
export function createThumbnailHandler(deps: ThumbnailDeps) {
  return async function renderThumbnail(job: QueuedJob<JobPayload<'template.thumbnail'>>): Promise<void> {
    const { templateId, teamId } = job.data;
    if (!deps.pdf || deps.storage.kind === 'unconfigured') return;
    const template = await templateRepository.findByIdOrSlug(deps.db, teamId, templateId);
    if (!template || template.id !== templateId) return;
    const png = await deps.pdf.screenshot(template.compiledHtml, THUMBNAIL_VIEWPORT, teamId);
    const hash = createHash('sha256').update(png).digest('hex').slice(0, 16);
    const key = `${teamId}/thumbnails/${templateId}-${hash}.png`;
    await deps.storage.put(key, png, 'image/png');
    const url = deps.storage.publicUrl(key);
    const row = await templateRepository.setThumbnailIfUnchanged(
      deps.db,
      teamId,
      templateId,
      template.compiledHtml,
      url,
    );
    if (!row) {
      // A later save (its own job makes its thumbnail) or a delete came first: the file stored above
      // is nobody's, unless a template shows the same bytes already.
      await releaseThumbnail(deps.db, deps.storage, teamId, url);
    } else if (row.previousUrl !== url) {
      await releaseThumbnail(deps.db, deps.storage, teamId, row.previousUrl);
    }
  };
}

/** A stored thumbnail's key: `<teamId>/thumbnails/<templateId>-<16 hex>.png` (see the handler). */
const THUMBNAIL_KEY = /^[^/]+\/thumbnails\/[A-Za-z0-9_]+-[0-9a-f]{16}\.png$/;

/**
 * The storage key behind `url` when it is a thumbnail this service stored for team `teamId` in
 * `storage` (its public URL maps back to exactly that key), else undefined: a URL set some other
 * way, another team's file or another storage's is never touched.
 */
export function thumbnailKeyOf(storage: FileStorage, teamId: string, url: string): string | undefined {
  const marker = `/${teamId}/thumbnails/`;
  const at = url.lastIndexOf(marker);
  if (at < 0) return undefined;
  const key = url.slice(at + 1);
  return THUMBNAIL_KEY.test(key) && storage.publicUrl(key) === url ? key : undefined;
}

/**
 * Deletes the thumbnail file behind `url` (team `teamId`) once no template row shows it any more:
 * called after a template got a new thumbnail and after a template was deleted. Duplicates share
 * their source's thumbnail URL until their own design changes, so the file stays while any
 * template (of any team, though keys are per team) still references it. A URL that is not one of
 * this storage's thumbnails of that team ({@link thumbnailKeyOf}) and an empty one are left
 * alone. Storage errors propagate (the thumbnail job then retries; a delete request logs them).
 */
export async function releaseThumbnail(
  db: Executor,
  storage: FileStorage,
  teamId: string,
  url: string | null | undefined,
): Promise<void> {
  if (!url || storage.kind === 'unconfigured') return;
  const key = thumbnailKeyOf(storage, teamId, url);
  if (!key) return;
  const [row] = await db
    .select({ count: sql<number>`count(*)::int` })
    .from(templates)
    .where(eq(templates.thumbnailUrl, url));
  if ((row?.count ?? 0) === 0) await storage.delete(key);
}

/** The templates module's job bindings, for the composition root to pass to `startWorkers`. */
export function templateJobHandlers(deps: ThumbnailDeps): Pick<JobHandlers, 'template.thumbnail'> {
  return { 'template.thumbnail': { kind: 'job', handle: createThumbnailHandler(deps) } };
}
