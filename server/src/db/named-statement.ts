import { createHash } from 'node:crypto';
import { fillPlaceholders, type SQL } from 'drizzle-orm';
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

/** Distinct texts {@link runNamed} prepares at most; later ones run unnamed (see there). */
const MAX_NAMED_TEXTS = 32;
const namedTexts = new Set<string>();

/**
 * Runs a statement built per call whose TEXT is the same on every call (every varying value a bound
 * parameter) as a named statement named by a hash of its text, on `pool`: PostgreSQL parses and
 * plans it once per pooled connection (and settles on a generic plan after five executions) instead
 * of on every call. For statements assembled from several modules' parts, where a
 * {@link NamedStatement} built once would need every part to take placeholders (session 21: the
 * worker's one-statement recording of a group of outcomes). Texts beyond the first
 * {@link MAX_NAMED_TEXTS} distinct ones run unnamed, so a text that does vary cannot leave an
 * unbounded number of prepared statements on each connection.
 * @throws the database's error.
 */
export async function runNamed<R extends pg.QueryResultRow>(
  pool: pg.Pool,
  query: { sql: string; params: unknown[] },
): Promise<R[]> {
  const name = `pw_${createHash('sha256').update(query.sql).digest('hex').slice(0, 32)}`;
  if (!namedTexts.has(name) && namedTexts.size < MAX_NAMED_TEXTS) namedTexts.add(name);
  const result = await pool.query<R>(
    namedTexts.has(name)
      ? { name, text: query.sql, values: query.params }
      : { text: query.sql, values: query.params },
  );
  return result.rows;
}
