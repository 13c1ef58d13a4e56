import type pg from 'pg';

/** A statement as sent: its text and its parameter values. */
export interface SentQuery {
  text: string;
  values: unknown[];
  /** The statement's name when it was sent as a named (prepared) statement. */
  name?: string | undefined;
}

/** The SQL texts sent through a pool while a {@link recordPoolStatements} recorder runs. */
export interface PoolStatements {
  /** The statements' texts, in order, since the start or the last clear(). */
  readonly texts: string[];
  /** The same statements with the values they were sent with (to EXPLAIN one as it ran). */
  readonly queries: SentQuery[];
  /** Forgets what was recorded so far. */
  clear(): void;
  /** Puts the pool's own `query` back. */
  stop(): void;
}

/**
 * Records the text of every statement `pool.query` sends (queries outside transactions, which is
 * how the app's reads go) until `stop()`: the tests that prove a cache saves a round trip count
 * them (issue #9 "Cheap hot path").
 */
export function recordPoolStatements(pool: pg.Pool | typeof pg.Client.prototype): PoolStatements {
  const target = pool as unknown as { query: (...args: unknown[]) => unknown };
  const query = target.query;
  const texts: string[] = [];
  const queries: SentQuery[] = [];
  target.query = function (this: unknown, ...args: unknown[]) {
    const [first, values] = args as [
      string | { text?: string; values?: unknown[]; name?: string } | undefined,
      unknown,
    ];
    const text = typeof first === 'string' ? first : (first?.text ?? '');
    texts.push(text);
    const sentValues = typeof first === 'string' ? values : (first?.values ?? values);
    const name = typeof first === 'string' ? undefined : first?.name;
    queries.push({ text, values: Array.isArray(sentValues) ? sentValues : [], name });
    return query.apply(this, args);
  };
  return {
    texts,
    queries,
    clear: () => {
      texts.length = 0;
      queries.length = 0;
    },
    stop: () => {
      target.query = query;
    },
  };
}

/**
 * Runs `action` and returns the texts of the statements `pool` sent meanwhile. Given
 * `pg.Client.prototype`, every client's statements: transactions' too (their connections are
 * checked out of the pool, so `pool.query` does not see them).
 */
export async function statementsDuring(
  pool: pg.Pool | typeof pg.Client.prototype,
  action: () => Promise<unknown>,
): Promise<string[]> {
  return (await queriesDuring(pool, action)).map((query) => query.text);
}

/**
 * Runs `action` and returns the statements `pool` (or, given `pg.Client.prototype`, every client)
 * sent meanwhile, with their values: for tests that EXPLAIN a statement exactly as it ran.
 */
export async function queriesDuring(
  pool: pg.Pool | typeof pg.Client.prototype,
  action: () => Promise<unknown>,
): Promise<SentQuery[]> {
  const recorder = recordPoolStatements(pool);
  try {
    await action();
  } finally {
    recorder.stop();
  }
  return recorder.queries;
}
