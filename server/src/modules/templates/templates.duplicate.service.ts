import type { Database } from '../../db/client.ts';
import { isUniqueViolation } from '../../db/errors.ts';
import { newId } from '../../ids.ts';
import { firstFreeSlug } from '../../slug.ts';
import { templateRepository } from './templates.repository.ts';
import { getTemplate, slugTaken, snapshotVersion } from './templates.service.ts';

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
 * slug the first free of `<slug>-copy`, `<slug>-copy-2`, …; `userId` becomes its creator and it
 * gets its own "Version 1" (spec "Templates (session)" duplicate, issue #4 "Duplicate").
 * Returns {id, name, slug, createdAt}.
 * @throws NOT_FOUND when the team has no such template; ALREADY_EXISTS (409) if a concurrent
 *   request took the chosen slug.
 */
export async function duplicateTemplate(
  db: Database,
  teamId: string,
  userId: string | null,
  idOrSlug: string,
): Promise<{ id: string; name: string; slug: string; createdAt: string }> {
  const source = await getTemplate(db, teamId, idOrSlug);
  const base = copySlugBase(source.slug);
  let slug = base;
  try {
    return await db.transaction(async (tx) => {
      slug = firstFreeSlug(base, await templateRepository.slugsLike(tx, teamId, base));
      const copy = await templateRepository.insert(tx, {
        id: newId('template'),
        teamId,
        name: copyName(source.name),
        slug,
        description: source.description,
        subject: source.subject,
        designJson: source.designJson,
        compiledHtml: source.compiledHtml,
        variables: source.variables,
        thumbnailUrl: source.thumbnailUrl,
        isActive: source.isActive,
        generatePdf: source.generatePdf,
        pdfFilename: source.pdfFilename,
        trackOpens: source.trackOpens,
        trackClicks: source.trackClicks,
        createdBy: userId,
      });
      await snapshotVersion(tx, copy, userId);
      return { id: copy.id, name: copy.name, slug: copy.slug, createdAt: copy.createdAt.toISOString() };
    });
  } catch (error) {
    if (isUniqueViolation(error)) throw slugTaken(slug);
    throw error;
  }
}
