import { createHash } from 'node:crypto';
import { and, eq } from 'drizzle-orm';
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
 * — only if the template still has the HTML that was captured (a later save's own job wins).
 * Nothing happens for a template deleted meanwhile, without a renderer or with unconfigured S3.
 * A render or storage failure throws: the queue retries (definitions.ts); the template is unaffected.
 */
export function createThumbnailHandler(deps: ThumbnailDeps) {
  return async function renderThumbnail(job: QueuedJob<JobPayload<'template.thumbnail'>>): Promise<void> {
    const { templateId, teamId } = job.data;
    if (!deps.pdf || deps.storage.kind === 'unconfigured') return;
    const template = await templateRepository.findByIdOrSlug(deps.db, teamId, templateId);
    if (!template || template.id !== templateId) return;
    const png = await deps.pdf.screenshot(template.compiledHtml, THUMBNAIL_VIEWPORT);
    const hash = createHash('sha256').update(png).digest('hex').slice(0, 16);
    const key = `${teamId}/thumbnails/${templateId}-${hash}.png`;
    await deps.storage.put(key, png, 'image/png');
    await deps.db
      .update(templates)
      .set({ thumbnailUrl: deps.storage.publicUrl(key) })
      .where(
        and(
          eq(templates.teamId, teamId),
          eq(templates.id, templateId),
          eq(templates.compiledHtml, template.compiledHtml),
        ),
      );
  };
}

/** The templates module's job bindings, for the composition root to pass to `startWorkers`. */
export function templateJobHandlers(deps: ThumbnailDeps): Pick<JobHandlers, 'template.thumbnail'> {
  return { 'template.thumbnail': { kind: 'job', handle: createThumbnailHandler(deps) } };
}
