import { z } from 'zod';

/**
 * The spec's response envelope ("Envelope rules"): `{success: true, data}` on success,
 * `{success: true}` for deletes, `{success: false, error: {code, message, details}}` on error.
 */
export function ok<T>(data: T): { success: true; data: T } {
  return { success: true, data };
}

/** The body of a successful delete: `{success: true}` without data. */
export const deleted = { success: true } as const;

/** Paginated `data` (spec envelope rule 3). */
export interface Page<T> {
  items: T[];
  total: number;
  page: number;
  pageSize: number;
  totalPages: number;
}

/** Builds a {@link Page}; `totalPages` is 0 when there are no items. */
export function page<T>(items: T[], total: number, pageNumber: number, pageSize: number): Page<T> {
  return { items, total, page: pageNumber, pageSize, totalPages: Math.ceil(total / pageSize) };
}

/** Query schema for paginated lists: page ≥ 1 (default 1), pageSize 1-100 (default 20) (spec "Limits"). */
export const paginationQuery = z.object({
  page: z.coerce.number().int().min(1).default(1),
  pageSize: z.coerce.number().int().min(1).max(100).default(20),
});

/** Response schema wrappers, for OpenAPI. */
export const envelopeOf = <T extends z.ZodType>(data: T) => z.object({ success: z.literal(true), data });
export const pageOf = <T extends z.ZodType>(item: T) =>
  envelopeOf(
    z.object({
      items: z.array(item),
      total: z.number(),
      page: z.number(),
      pageSize: z.number(),
      totalPages: z.number(),
    }),
  );
export const deletedEnvelope = z.object({ success: z.literal(true) });

/** ISO 8601 UTC with milliseconds, or null (spec envelope rule 5). */
export function isoOrNull(date: Date | null | undefined): string | null {
  return date ? date.toISOString() : null;
}
