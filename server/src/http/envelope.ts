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

/** Digits only: what a query integer may be written as (no sign, space, fraction, exponent or 0x). */
const DECIMAL_DIGITS = /^[0-9]+$/;

/**
 * A query-string integer from `min` to `max` (default: the largest safe integer), `fallback`
 * when the parameter is absent. Written in decimal digits only; anything else, the empty value
 * included, is a VALIDATION_ERROR "must be a positive integer" (or "must be an integer from
 * `min` to `max`"), and a parameter given twice (`?page=1&page=2`, which the query parser turns
 * into an array) is "must be given once". Review finding, session 18: `z.coerce.number()`
 * answered those with "expected number, received NaN" and "Too small", and took `0x10`, `1e2`
 * and ` 1`. The OpenAPI document shows an integer with its bounds and default (zod describes a
 * preprocessed value by its target schema).
 */
export function queryInteger(options: { min: number; max?: number; fallback: number }) {
  const { min, fallback } = options;
  const max = options.max ?? Number.MAX_SAFE_INTEGER;
  const expected =
    options.max === undefined
      ? min === 1
        ? 'must be a positive integer'
        : `must be an integer of at least ${min}`
      : `must be an integer from ${min} to ${max}`;
  return (
    z
      .preprocess((value, ctx) => {
        if (Array.isArray(value)) {
          ctx.addIssue({ code: 'custom', message: 'must be given once', input: value });
          return z.NEVER;
        }
        // A number is the fallback only (see prefault below): the query parser gives strings.
        const number =
          typeof value === 'number'
            ? value
            : typeof value === 'string' && DECIMAL_DIGITS.test(value)
              ? Number(value)
              : Number.NaN;
        if (!(number >= min && number <= max)) {
          ctx.addIssue({ code: 'custom', message: expected, input: value });
          return z.NEVER;
        }
        return number;
      }, z.number().int().min(min).max(max))
      // Not .default(): zod leaves a transformed value's default out of the input JSON schema, so
      // the OpenAPI document lost it; a prefault runs through the checks above and is documented.
      .prefault(fallback)
  );
}

/** Query schema for paginated lists: page ≥ 1 (default 1), pageSize 1-100 (default 20) (spec "Limits"). */
export const paginationQuery = z.object({
  page: queryInteger({ min: 1, fallback: 1 }),
  pageSize: queryInteger({ min: 1, max: 100, fallback: 20 }),
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
