import { createHash } from 'node:crypto';
import { fillPlaceholders, type SQL, sql } from 'drizzle-orm';
import { PgDialect } from 'drizzle-orm/pg-core';
import type pg from 'pg';
import type { Executor } from './client.ts';

const dialect = new PgDialect();

/**
 * A hot statement built once and run as a named (server-side prepared) statement (issue #11
 * bench: PostgreSQL spent ~300 µs parsing and ~500 µs planning the webhook recorder's statement on
 * each execution, as long as executing it for 20 attempts, and building its text with Drizzle cost
 * the worker ~200 µs more). A named statement is parsed once per pooled connection, and planned
 * once too when PostgreSQL settles on its generic plan after five executions (PostgreSQL
 * "PREPARE", plan_cache_mode). Its text is built once, with `sql.placeholder(name)` for every
 * value that varies; its name is a hash of the text (one text, one name).
 */
export class NamedStatement<V extends Record<string, unknown>> {
  readonly name: string;
  readonly text: string;
  readonly #params: unknown[];

  /** @param query the statement; values that vary are `sql.placeholder(key)` of `V`'s keys. */
  constructor(query: SQL) {
    const { sql: text, params } = dialect.sqlToQuery(query);
    this.text = text;
    this.#params = params;
    this.name = `pw_${createHash('sha256').update(text).digest('hex').slice(0, 32)}`;
  }

  /**
   * Runs the statement with `values` on `pool` and returns its rows (pg's type parsing: timestamps
   * as Dates).
   * @throws the database's error; Drizzle's when a placeholder has no value.
   */
  async run<R extends pg.QueryResultRow>(pool: pg.Pool, values: V): Promise<R[]> {
    const result = await pool.query<R>({
      name: this.name,
      text: this.text,
      values: fillPlaceholders(this.#params, values),
    });
    return result.rows;
  }
}

/** The pool under `executor` when it is the database itself, not a transaction (Drizzle's `$client`). */
export function poolOf(executor: Executor): pg.Pool | undefined {
  return (executor as { $client?: pg.Pool }).$client;
}

/**
 * A part of a statement (a condition, a data-modifying CTE) built once per shape, with every value
 * that varies as `sql.placeholder(name)`, so a statement composed of parts is built once and run as
 * a {@link NamedStatement}: `sql` is the same object for every call of one shape, `key` names that
 * shape (the composing statement caches by it), and `values` are this call's values of its
 * placeholders (names unique across the parts of one statement).
 * Session 22: the worker's one-statement recording of a group of outcomes was built by Drizzle from
 * its parts for every group, about 4 % of the worker's CPU (profile of `bench:send`'s drain).
 */
export interface StatementPart {
  key: string;
  sql: SQL;
  values: Record<string, unknown>;
}

/** The part that is always true (no condition): `true`, no values. */
export const ALWAYS: StatementPart = { key: 'true', sql: sql`true`, values: {} };

/**
 * `prepare(db)` once per database or transaction it is called with (a WeakMap, so a transaction's
 * entry goes with it): for Drizzle queries with `sql.placeholder` values and `.prepare(name)`,
 * whose SQL Drizzle then builds once, run as a named statement (parsed and planned once per
 * connection) with its rows mapped as usual. The workers' by-id reads of each claimed batch
 * (webhooks, adapters, email logs; Drizzle's select building was ~2 % of the send worker's CPU,
 * session 22).
 */
export function preparedPerExecutor<P>(prepare: (db: Executor) => P): (db: Executor) => P {
  const kept = new WeakMap<Executor, P>();
  return (db) => {
    let prepared = kept.get(db);
    if (!prepared) {
      prepared = prepare(db);
      kept.set(db, prepared);
    }
    return prepared;
  };
}
