import type pg from 'pg';

/** The SQL texts sent through a pool while a {@link recordPoolStatements} recorder runs. */
export interface PoolStatements {
  /** The statements' texts, in order, since the start or the last clear(). */
  readonly texts: string[];
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
  target.query = function (this: unknown, ...args: unknown[]) {
    const first = args[0] as string | { text?: string } | undefined;
    texts.push(typeof first === 'string' ? first : (first?.text ?? ''));
    return query.apply(this, args);
  };
  return {
    texts,
    clear: () => {
      texts.length = 0;
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
  const recorder = recordPoolStatements(pool);
  try {
    await action();
  } finally {
    recorder.stop();
  }
  return recorder.texts;
}
