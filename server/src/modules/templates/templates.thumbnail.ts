import { createHash } from 'node:crypto';
import type { Database, Executor } from '../../db/client.ts';
import { newJobId } from '../../ids.ts';
import { type JobPayload, TEMPLATE_THUMBNAIL_JOB } from '../../jobs/definitions.ts';
import type { JobQueue, QueuedJob } from '../../jobs/queue.ts';
import type { JobHandlers } from '../../jobs/registry.ts';
import type { PdfRenderer } from '../pdf/index.ts';
import { type FileStorage, isValidStorageKey } from '../storage/index.ts';
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
 * `<teamId>/thumbnails/<templateId>-<sha256 prefix>.png`, and that key recorded on the template
 * (its `thumbnailUrl` is built from it when read, {@link thumbnailUrlOf}) — only if the template
 * still has the HTML that was captured (a later save's own job wins; the file just stored is then
 * deleted again unless a template shows it). The thumbnail it replaces (the row's as the update
 * found it, so overlapping jobs each release the one they replaced) is then deleted from storage
 * unless another template (a duplicate) still shows it ({@link releaseThumbnail}; review findings,
 * session 14: both files were left behind for good). Nothing happens for a template deleted
 * meanwhile, without a renderer or with unconfigured S3.
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
    const row = await templateRepository.setThumbnailIfUnchanged(
      deps.db,
      teamId,
      templateId,
      template.compiledHtml,
      key,
    );
    if (!row) {
      // A later save (its own job makes its thumbnail) or a delete came first: the file stored above
      // is nobody's, unless a template shows the same bytes already.
      await releaseThumbnail(deps.db, deps.storage, teamId, key);
    } else if (thumbnailKeyOf(teamId, row.previous) !== key) {
      await releaseThumbnail(deps.db, deps.storage, teamId, row.previous);
    }
  };
}

/** A thumbnail's file name under `<teamId>/thumbnails/`: `<templateId>-<16 hex>.png` (see the handler). */
const THUMBNAIL_NAME = /^[A-Za-z0-9_]+-[0-9a-f]{16}\.png$/;
const ABSOLUTE_URL = /^https?:\/\//i;

/**
 * The storage key a template's stored thumbnail (the `thumbnail_url` column) names for team
 * `teamId`, else undefined. The column holds the key, `<teamId>/thumbnails/<templateId>-<16
 * hex>.png`, as the handler stores it; before migration 0018 (and from a process of an older
 * release during an upgrade) it held the absolute URL the file was served at then,
 * `<BASE_URL>/files/<key>` or `<S3 public base>/<key>` with whatever BASE_URL or S3_PUBLIC_URL was
 * set then (review finding newuser 2: such URLs broke with a change of either, and their files
 * were never deleted): a URL whose path ends with such a key of the team maps to that key. Anything
 * else ('' for none, another team's key, a value set some other way) is undefined: never shown as
 * a thumbnail of ours, never deleted.
 */
export function thumbnailKeyOf(teamId: string, stored: string): string | undefined {
  const prefix = `${teamId}/thumbnails/`;
  let key = stored;
  if (ABSOLUTE_URL.test(stored)) {
    if (!URL.canParse(stored)) return undefined;
    const { pathname } = new URL(stored);
    const at = pathname.lastIndexOf(`/${prefix}`);
    if (at < 0) return undefined;
    key = pathname.slice(at + 1);
  }
  const isOurs =
    key.startsWith(prefix) && THUMBNAIL_NAME.test(key.slice(prefix.length)) && isValidStorageKey(key);
  return isOurs ? key : undefined;
}

/**
 * A template's `thumbnailUrl` as the API shows it (spec "Template"): the public URL of its stored
 * thumbnail key ({@link thumbnailKeyOf}) in `storage` as configured now — `<BASE_URL>/files/<key>`
 * or `<S3 public base>/<key>`, built when read as uploaded images' URLs are, so it follows a change
 * of BASE_URL or S3_PUBLIC_URL. '' when the template has no thumbnail, when the stored value names
 * none of the team's, and while S3 is chosen but not configured (no URL can be built then; the list
 * still answers).
 */
export function thumbnailUrlOf(storage: FileStorage, teamId: string, stored: string): string {
  const key = thumbnailKeyOf(teamId, stored);
  if (!key || storage.kind === 'unconfigured') return '';
  return storage.publicUrl(key);
}

/**
 * Deletes the thumbnail file a template showed (`stored`, its `thumbnail_url` value: a key, or a
 * URL from before migration 0018, {@link thumbnailKeyOf}; team `teamId`) once no template of the
 * team shows it any more: called after a template got a new thumbnail and after a template was
 * deleted. Duplicates share their source's thumbnail until their own design's is made, so the file
 * stays while any template still references its key, stored either way (keys are per team, and a
 * duplicate stays in its source's team). A value naming no thumbnail of the team and an empty one
 * are left alone. Storage errors propagate (the thumbnail job then retries; a delete request logs
 * them).
 */
export async function releaseThumbnail(
  db: Executor,
  storage: FileStorage,
  teamId: string,
  stored: string | null | undefined,
): Promise<void> {
  if (!stored || storage.kind === 'unconfigured') return;
  const key = thumbnailKeyOf(teamId, stored);
  if (!key) return;
  if (!(await templateRepository.isThumbnailShown(db, teamId, key))) await storage.delete(key);
}

/** The templates module's job bindings, for the composition root to pass to `startWorkers`. */
export function templateJobHandlers(deps: ThumbnailDeps): Pick<JobHandlers, 'template.thumbnail'> {
  return { 'template.thumbnail': { kind: 'job', handle: createThumbnailHandler(deps) } };
}
