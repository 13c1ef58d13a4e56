import { mkdirSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { PGlite } from '@electric-sql/pglite';
import { sql } from 'drizzle-orm';
import { drizzle as drizzlePostgres } from 'drizzle-orm/node-postgres';
import { migrate as migratePostgres } from 'drizzle-orm/node-postgres/migrator';
import type { PgDatabase, PgQueryResultHKT, PgTransaction } from 'drizzle-orm/pg-core';
import { drizzle as drizzlePglite } from 'drizzle-orm/pglite';
import { migrate as migratePglite } from 'drizzle-orm/pglite/migrator';
import pg from 'pg';
import * as schema from './schema/index.ts';

export type Schema = typeof schema;
/** A Drizzle database over either driver; repositories take this (or a transaction). */
export type Database = PgDatabase<PgQueryResultHKT, Schema>;
export type Transaction = PgTransaction<PgQueryResultHKT, Schema>;
/** Either the database or an open transaction: what a repository function runs its SQL on. */
export type Executor = Database | Transaction;

/** The database connection a process holds: embedded PGlite or a PostgreSQL pool. */
export type DatabaseHandle =
  | { kind: 'pglite'; db: Database; pglite: PGlite; close: () => Promise<void> }
  | { kind: 'postgres'; db: Database; pool: pg.Pool; connectionString: string; close: () => Promise<void> };

const migrationsFolder = path.join(path.dirname(fileURLToPath(import.meta.url)), 'migrations');

/**
 * Opens the system of record: PostgreSQL when `databaseUrl` is set, otherwise an embedded
 * PGlite database stored in `<dataDir>/pgdata` (ARCHITECTURE.md "Runtime shape").
 * `dataDir: 'memory://'` gives an in-memory PGlite (tests).
 */
export async function openDatabase(options: {
  databaseUrl?: string | undefined;
  dataDir: string;
  poolSize?: number;
}): Promise<DatabaseHandle> {
  if (options.databaseUrl) {
    const pool = new pg.Pool({ connectionString: options.databaseUrl, max: options.poolSize ?? 10 });
    // An idle client's error (e.g. the server restarting) must not kill the process.
    pool.on('error', () => {});
    const db = drizzlePostgres({ client: pool, schema }) as unknown as Database;
    return {
      kind: 'postgres',
      db,
      pool,
      connectionString: options.databaseUrl,
      close: () => pool.end(),
    };
  }
  let dataPath: string | undefined;
  if (options.dataDir !== 'memory://') {
    dataPath = path.resolve(options.dataDir, 'pgdata');
    mkdirSync(dataPath, { recursive: true });
  }
  const pglite = await PGlite.create(dataPath ? { dataDir: dataPath } : {});
  const db = drizzlePglite({ client: pglite, schema }) as unknown as Database;
  return { kind: 'pglite', db, pglite, close: () => pglite.close() };
}

/**
 * Applies the Drizzle migrations in `db/migrations` (the same SQL on both drivers).
 * On PostgreSQL an advisory lock serialises concurrent start-ups of several processes.
 */
export async function migrateDatabase(handle: DatabaseHandle): Promise<void> {
  if (handle.kind === 'pglite') {
    await migratePglite(handle.db as never, { migrationsFolder });
    return;
  }
  const client = await handle.pool.connect();
  try {
    await client.query('SELECT pg_advisory_lock(724001)');
    await migratePostgres(handle.db as never, { migrationsFolder });
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
