/** Slugs: lowercase ASCII letters, digits and single hyphens, 1-100 characters (issue #4). */
export const SLUG_PATTERN = /^[a-z0-9]+(?:-[a-z0-9]+)*$/;

/**
 * A URL-friendly slug from a name: accents folded (NFKD), anything else turned into hyphens.
 * Falls back to "template" when nothing is left (a name of emoji only).
 */
export function slugify(name: string): string {
  const slug = name
    .normalize('NFKD')
    .replace(/[\u0300-\u036f]/g, '')
    .toLowerCase()
    .replace(/[^a-z0-9]+/g, '-')
    .replace(/^-+|-+$/g, '')
    .slice(0, 90)
    .replace(/-+$/g, '');
  return slug || 'template';
}

/** The first of `base`, `base-2`, `base-3`, … that `taken` does not contain. */
export function firstFreeSlug(base: string, taken: ReadonlySet<string>): string {
  if (!taken.has(base)) return base;
  for (let n = 2; ; n++) {
    const candidate = `${base}-${n}`;
    if (!taken.has(candidate)) return candidate;
  }
}
