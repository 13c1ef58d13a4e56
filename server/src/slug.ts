/** Slugs: lowercase ASCII letters, digits and single hyphens (issue #4). */
export const SLUG_PATTERN = /^[a-z0-9]+(?:-[a-z0-9]+)*$/;

/**
 * A URL-safe slug from a display name: accents folded (NFKD), anything else turned into single
 * hyphens, at most `maxLength` characters; `fallback` when nothing is left
 * ("Équipe Nord" → "equipe-nord", "🎉" → fallback).
 */
export function slugify(name: string, fallback: string, maxLength = 90): string {
  const slug = name
    .normalize('NFKD')
    .replace(/[\u0300-\u036f]/g, '')
    .toLowerCase()
    .replace(/[^a-z0-9]+/g, '-')
    .replace(/^-+|-+$/g, '')
    .slice(0, maxLength)
    .replace(/-+$/g, '');
  return slug || fallback;
}

/** The first of `base`, `base-2`, `base-3`, … that `taken` does not contain. */
export function firstFreeSlug(base: string, taken: ReadonlySet<string>): string {
  if (!taken.has(base)) return base;
  for (let n = 2; ; n++) {
    const candidate = `${base}-${n}`;
    if (!taken.has(candidate)) return candidate;
  }
}
