/**
 * Statistics that no longer describe a table. PostgreSQL plans a statement from the table as it
 * last saw it (its statistics, and a cached plan's from when it was made); a queue-like table
 * that was (nearly) empty then and holds a burst now gets plans that read and sort the whole
 * backlog on every fetch or claim, until autovacuum analyzes the table a minute or more later
 * (measured: pg-boss's fetch 7.8 instead of 1.3 ms with 5,000 jobs waiting; the webhook outbox's
 * claim 161 ms instead of 0.4 ms with 300,000 rows due). An ANALYZE refreshes the statistics and
 * invalidates the plans made from the old ones. Used by JobQueue.refreshStatistics and the
 * webhook dispatcher (issue #11).
 */

/** Rows below which stale statistics are left to autovacuum. */
export const STALE_BACKLOG_MIN_ROWS = 500;
/** Least time between two checks of one table (or queue) in one process (ms). */
export const STATISTICS_CHECK_INTERVAL_MS = 60_000;

/**
 * True when the statistics are stale: `actual` rows (at least {@link STALE_BACKLOG_MIN_ROWS}) are
 * ten times or more the `estimated` rows the planner goes by.
 */
export function statisticsAreStale(actual: number, estimated: number): boolean {
  return actual >= STALE_BACKLOG_MIN_ROWS && estimated * 10 <= actual;
}

/**
 * The times of a process's statistics checks, per key (a table, a queue): callers may ask on every
 * busy batch; a key's check is due once per {@link STATISTICS_CHECK_INTERVAL_MS}.
 */
export class StatisticsChecks {
  readonly #checkedAt = new Map<string, number>();

  /** True when `key` was not checked within the interval; the check counts from now then. */
  due(key: string): boolean {
    const now = Date.now();
    if (now - (this.#checkedAt.get(key) ?? Number.NEGATIVE_INFINITY) < STATISTICS_CHECK_INTERVAL_MS)
      return false;
    this.#checkedAt.set(key, now);
    return true;
  }
}
