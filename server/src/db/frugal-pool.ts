import type pg from 'pg';

/** A query runner with pg-boss's `IDatabase` shape (its `db` option): text and values in, rows out. */
export interface FrugalExecutor {
  executeSql(text: string, values?: unknown[]): Promise<pg.QueryResult>;
}

/**
 * Runs queries on `pool`, but lets them use another connection only when a query has waited
 * `growAfterMs` for one (issue #9, idle memory). A pg pool opens a connection for every query that
 * finds none free, so pollers that fire together (pg-boss's and the claim loops' fetches every
 * 500 ms, a few ms each) keep two or three connections open — PostgreSQL backends of ~7 MB each —
 * where one serves them in turn.
 *
 * Here at most `limit` queries run at once, starting at 1; the others wait in arrival order for a
 * running one to end. A query that waited `growAfterMs` raises the limit by one (up to the pool's
 * `max`) and starts: the pool opens a connection for it. After `shrinkAfterMs` without such a wait
 * the limit drops by one, and the connection no longer needed is closed by the pool once it has
 * been idle for its `idleTimeoutMillis` (pg-pool reuses the most recently released connection).
 * Under load the pool so grows as before, each new connection costing one query a wait of
 * `growAfterMs`; an idle process ends with one connection.
 * A query's result or error is the pool's.
 * @param options.growAfterMs how long (ms) a query waits for a running one before the limit grows.
 * @param options.shrinkAfterMs how long (ms) without such a wait before the limit shrinks by one.
 */
export function frugalExecutor(
  pool: pg.Pool,
  options: { growAfterMs: number; shrinkAfterMs: number },
): FrugalExecutor {
  const max = pool.options.max ?? 10;
  let limit = 1;
  /** When the limit last changed (ms since the epoch). */
  let changed = Date.now();
  /** Queries handed to the pool and not yet answered. */
  let active = 0;
  /** Queries waiting for a running one to end, oldest first: each starts its query when called. */
  const waiting: (() => void)[] = [];
  const room = () => {
    if (limit > 1 && Date.now() - changed >= options.shrinkAfterMs) {
      limit--;
      changed = Date.now();
    }
    return active < limit;
  };
  const run = async (text: string, values?: unknown[]) => {
    active++;
    try {
      return await pool.query(text, values);
    } finally {
      active--;
      // pg-pool released the connection before answering: the oldest waiter takes it.
      if (waiting.length > 0 && room()) waiting.shift()!();
    }
  };
  return {
    executeSql(text, values) {
      if (waiting.length === 0 && room()) return run(text, values);
      return new Promise((resolve, reject) => {
        const go = () => {
          clearTimeout(timer);
          run(text, values).then(resolve, reject);
        };
        const timer = setTimeout(() => {
          waiting.splice(waiting.indexOf(go), 1);
          if (limit < max) limit++;
          changed = Date.now();
          run(text, values).then(resolve, reject);
        }, options.growAfterMs);
        waiting.push(go);
      });
    },
  };
}

/**
 * Closes the connections of `pool` that are idle now (busy ones are left alone): each is checked
 * out and released as broken, which pg-pool ends instead of keeping. Returns how many it closed.
 *
 * Why (issue #9, idle memory): a PostgreSQL backend keeps the catalog and plan caches of everything
 * it ran, and those never shrink. The connection that ran start-up (migrations, pg-boss's schema
 * and queue declarations) stays open while the process idles, because pg-boss's polls every
 * 500 ms keep using it: measured 11.8 MB of distinct pages for that backend against 9.1 MB for one
 * that only ever polled. Called once start-up is done, the next query opens a fresh connection.
 * A connection a query takes between the count and the checkout is replaced by a new one, which
 * is then closed: harmless.
 */
export async function closeIdleConnections(pool: pg.Pool): Promise<number> {
  let closed = 0;
  for (let idle = pool.idleCount; idle > 0; idle--) {
    const client = await pool.connect();
    client.release(true);
    closed++;
  }
  return closed;
}
