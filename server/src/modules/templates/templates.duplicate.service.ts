import type { Database } from '../../db/client.ts';
import { notFound } from '../../http/errors.ts';
import { newId } from '../../ids.ts';
import { templateRepository } from './templates.repository.ts';
import { snapshotVersion, withFreeSlug } from './templates.service.ts';
import { enqueueThumbnail, type ThumbnailQueue, thumbnailKeyOf } from './templates.thumbnail.ts';

/** Template names are 1-100 characters (spec "Limits"); the copy marker must fit inside. */
const MAX_NAME = 100;
const COPY_MARKER = ' (Copy)';
/** Source slugs are cut here so `-copy` and a `-N` counter keep a copy's slug within 100. */
const MAX_SLUG_STEM = 90;

/** "Welcome" → "Welcome (Copy)", the name cut so the result stays within 100 characters. */
export function copyName(name: string): string {
  return `${name.slice(0, MAX_NAME - COPY_MARKER.length).trimEnd()}${COPY_MARKER}`;
}

/** "welcome" → "welcome-copy" (then `firstFreeSlug` adds "-2", "-3", …). */
export function copySlugBase(slug: string): string {
  return `${slug.slice(0, MAX_SLUG_STEM).replace(/-+$/, '')}-copy`;
}

/**
 * Copies a template (id or slug) with everything it holds: description, subject, design,
 * compiled HTML, variables, thumbnail, isActive and PDF settings. Its name gets " (Copy)", its
 * slug the first free of `<slug>-copy`, `<slug>-copy-2`, … (a slug a concurrent duplicate took
 * meanwhile: the next one, withFreeSlug, as createTemplate does); `userId` becomes its creator
 * and it gets its own "Version 1" (spec "Templates (session)" duplicate, issue #4 "Duplicate").
 * The source is read under a share lock in the copy's transaction: its thumbnail cannot be
 * replaced, nor the source deleted, until the copy showing the same thumbnail has committed (each
 * of those deletes the file once no template shows it: releaseThumbnail; read before the
 * transaction, the copy could commit pointing at a file deleted meanwhile, review finding,
 * session 14). A source without a thumbnail yet (its job not done) gets the copy a job of its own.
 * Returns {id, name, slug, createdAt}.
 * @throws NOT_FOUND when the team has no such template; ALREADY_EXISTS (409) when 20 tries found
 *   every chosen slug taken.
 */
export async function duplicateTemplate(
  db: Database,
  teamId: string,
  userId: string | null,
  idOrSlug: string,
  thumbnails?: ThumbnailQueue,
): Promise<{ id: string; name: string; slug: string; createdAt: string }> {
  return withFreeSlug(db, teamId, undefined, async (tx, slugFor) => {
    const source = await templateRepository.findByIdOrSlug(tx, teamId, idOrSlug, { lock: 'share' });
    if (!source) throw notFound('Template');
    const copy = await templateRepository.insert(tx, {
      id: newId('template'),
      teamId,
      name: copyName(source.name),
      slug: await slugFor(copySlugBase(source.slug)),
      description: source.description,
      subject: source.subject,
      designJson: source.designJson,
      compiledHtml: source.compiledHtml,
      variables: source.variables,
      // Stored as a key even when the source still holds a URL from before migration 0018.
      thumbnailKey: thumbnailKeyOf(teamId, source.thumbnailKey) ?? '',
      isActive: source.isActive,
      generatePdf: source.generatePdf,
      pdfFilename: source.pdfFilename,
      trackOpens: source.trackOpens,
      trackClicks: source.trackClicks,
      createdBy: userId,
    });
    await snapshotVersion(tx, copy, userId);
    // Every copy gets its own thumbnail job: the source's thumbnail may show an older design whose
    // job has not run yet (review finding, session 16: the copy then kept it for good). The copy
    // shows the source's until its own is made.
    await enqueueThumbnail(thumbnails, tx, copy);
    return { id: copy.id, name: copy.name, slug: copy.slug, createdAt: copy.createdAt.toISOString() };
  });
}
