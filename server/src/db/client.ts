import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { sql } from 'drizzle-orm';
import { drizzle } from 'drizzle-orm/node-postgres';
import { migrate } from 'drizzle-orm/node-postgres/migrator';
import type { PgDatabase, PgQueryResultHKT, PgTransaction } from 'drizzle-orm/pg-core';
import pg from 'pg';
import { type EmbeddedPostgres, startEmbeddedPostgres } from './embedded-postgres.ts';
import * as schema from './schema/index.ts';

export type Schema = typeof schema;
/** The Drizzle database; repositories take this (or a transaction). */
export type Database = PgDatabase<PgQueryResultHKT, Schema>;
export type Transaction = PgTransaction<PgQueryResultHKT, Schema>;
/** Either the database or an open transaction: what a repository function runs its SQL on. */
export type Executor = Database | Transaction;

/** The database connection a process holds: a pg pool on an external or the embedded PostgreSQL. */
export interface DatabaseHandle {
  db: Database;
  pool: pg.Pool;
  /** The server's URL, for the clients that open their own connections (pg-boss). */
  connectionString: string;
  /** The embedded server when this process runs one (no DATABASE_URL). */
  embedded?: EmbeddedPostgres;
  /** Closes the pool, then stops the embedded server if any. */
  close: () => Promise<void>;
}

const migrationsFolder = path.join(path.dirname(fileURLToPath(import.meta.url)), 'migrations');

/** Pool sizes: the embedded server lives beside this one process, so a few connections suffice. */
const EXTERNAL_POOL_SIZE = 10;
const EMBEDDED_POOL_SIZE = 5;
/**
 * An idle pooled connection is closed after this long (ms; pg's default is 10 s). Each open
 * connection is a PostgreSQL backend of ~6 MB; when the process idles, its polling keeps one
 * connection per pool busy and the rest close (issue #9, idle memory). Under load connections
 * are never idle that long, so none is reopened.
 */
export const POOL_IDLE_TIMEOUT_MS = 5_000;

/**
 * Opens the system of record: the PostgreSQL at `databaseUrl` when set, otherwise an embedded
 * PostgreSQL on `<dataDir>/pgdata`, started now and stopped by `close()` (ARCHITECTURE.md
 * "Runtime shape"). One SQL engine everywhere.
 */
export async function openDatabase(options: {
  databaseUrl?: string | undefined;
  dataDir?: string;
  poolSize?: number;
}): Promise<DatabaseHandle> {
  let embedded: EmbeddedPostgres | undefined;
  let connectionString = options.databaseUrl;
  if (!connectionString) {
    if (!options.dataDir) throw new Error('openDatabase needs a databaseUrl or a dataDir.');
    embedded = await startEmbeddedPostgres({ dataDir: options.dataDir });
    connectionString = embedded.connectionString;
  }
  const pool = new pg.Pool({
    connectionString,
    max: options.poolSize ?? (embedded ? EMBEDDED_POOL_SIZE : EXTERNAL_POOL_SIZE),
    idleTimeoutMillis: POOL_IDLE_TIMEOUT_MS,
  });
  // An idle client's error (e.g. the server restarting) must not kill the process.
  pool.on('error', () => {});
  const db = drizzle({ client: pool, schema }) as unknown as Database;
  let closing: Promise<void> | undefined;
  const close = () => {
    closing ??= (async () => {
      await pool.end().catch(() => {});
      await embedded?.stop();
    })();
    return closing;
  };
  return { db, pool, connectionString, ...(embedded ? { embedded } : {}), close };
}

/**
 * Applies the Drizzle migrations in `db/migrations`. An advisory lock serialises concurrent
 * start-ups of several processes.
 */
export async function migrateDatabase(handle: DatabaseHandle): Promise<void> {
  const client = await handle.pool.connect();
  try {
    await client.query('SELECT pg_advisory_lock(724001)');
    await migrate(handle.db as never, { migrationsFolder });
  } finally {
    await client.query('SELECT pg_advisory_unlock(724001)').catch(() => {});
    client.release();
  }
}

/** True when a trivial query succeeds (used by `/readyz`). */
export async function isDatabaseReachable(db: Database): Promise<boolean> {
  try {
    await db.execute(sql`select 1`);
    return true;
  } catch {
    return false;
  }
}
