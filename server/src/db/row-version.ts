import { type SQL, sql } from 'drizzle-orm';
import type { AnyPgColumn } from 'drizzle-orm/pg-core';

/**
 * The `updated_at` to write when a row whose `updated_at` is its version changes: the database's
 * `now()`, but always at least a millisecond after the value it replaces (the column keeps
 * milliseconds). Workers keep webhooks and adapters keyed by it (the dispatcher's webhook rows, the
 * provider cache): two changes within one millisecond — two API processes, or two rotations in one
 * transaction, where `now()` does not move — left two contents under one version, and a worker
 * kept the older (review finding, session 18). Concurrent updates of a row run one after the
 * other, and the later one computes this from the earlier one's committed value.
 */
export function nextRowVersion(column: AnyPgColumn): SQL {
  return sql`greatest(now(), ${column} + interval '1 millisecond')`;
}
