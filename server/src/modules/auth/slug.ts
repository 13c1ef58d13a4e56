/**
 * A URL-safe slug from a display name: lower-case ASCII letters, digits and single hyphens,
 * at most 48 characters; `fallback` when nothing is left ("Équipe Nord" → "equipe-nord").
 */
export function slugify(name: string, fallback = 'team'): string {
  const slug = name
    .normalize('NFKD')
    .replace(/[\u0300-\u036f]/g, '')
    .toLowerCase()
    .replace(/[^a-z0-9]+/g, '-')
    .replace(/^-+|-+$/g, '')
    .slice(0, 48)
    .replace(/-+$/g, '');
  return slug || fallback;
}
