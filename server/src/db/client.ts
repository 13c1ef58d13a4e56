import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { sql } from 'drizzle-orm';
import { readMigrationFiles } from 'drizzle-orm/migrator';
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
 * How long a request waits for a pooled connection (ms): for a free one when all are busy, or for
 * a new one to be ready (TCP, TLS, authentication). The job queue's pool waits as long
 * (jobs/queue.ts). Without it, a server that accepts connections but never answers (frozen, or
 * behind a network partition) held every request, and start-up, for ever (review finding,
 * session 18).
 */
export const POOL_CONNECTION_TIMEOUT_MS = 10_000;

/**
 * How long `/readyz`'s check waits for the database's answer (ms) before calling it unreachable:
 * a load balancer's probe must get its 503 while the database stalls, not hang with it (review
 * finding, session 18).
 */
export const READY_CHECK_TIMEOUT_MS = 2_000;

/**
 * How long `close()` waits for connections still checked out of the pool (ms) before it cuts them:
 * a query stuck on a stalled server kept `pool.end()`, and so a SIGTERM'd process, waiting for ever
 * (review finding, session 18). By then the API and the workers have stopped: what is left is stuck.
 */
export const POOL_CLOSE_TIMEOUT_MS = 5_000;

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
    connectionTimeoutMillis: POOL_CONNECTION_TIMEOUT_MS,
  });
  // An idle client's error (e.g. the server restarting) must not kill the process.
  pool.on('error', () => {});
  // The pool's connections, for close() to cut those stuck in a query.
  const connections = new Set<pg.Client>();
  pool.on('connect', (client) => connections.add(client));
  pool.on('remove', (client) => connections.delete(client));
  const db = drizzle({ client: pool, schema }) as unknown as Database;
  let closing: Promise<void> | undefined;
  const close = () => {
    closing ??= (async () => {
      await endPool(pool, connections, POOL_CLOSE_TIMEOUT_MS);
      await embedded?.stop();
    })();
    return closing;
  };
  return { db, pool, connectionString, ...(embedded ? { embedded } : {}), close };
}

/**
 * The database holds migrations this build's journal does not know: a newer release migrated it
 * (a rollback, or an older process still rolling). This build's code would run on a schema it was
 * not written for, so `migrate` and `start` refuse (review finding: "Migrations applied." was
 * printed and the server served on it).
 */
export class SchemaNewerThanReleaseError extends Error {
  /** How many of the database's migrations this build does not know. */
  readonly unknownMigrations: number;

  constructor(unknownMigrations: number) {
    super(
      `The database schema is newer than this release (${unknownMigrations} migration${unknownMigrations === 1 ? '' : 's'} it does not know): run the release that migrated it.`,
    );
    this.name = 'SchemaNewerThanReleaseError';
    this.unknownMigrations = unknownMigrations;
  }
}

/**
 * Applies the Drizzle migrations in `db/migrations`, then checks that the database holds none this
 * build does not know. An advisory lock serialises concurrent start-ups of several processes.
 * @throws SchemaNewerThanReleaseError when the database is newer than this build (see
 *   {@link unknownMigrationCount}); nothing is applied then, since drizzle applies only migrations
 *   later than the database's newest.
 */
export async function migrateDatabase(handle: DatabaseHandle): Promise<void> {
  const client = await handle.pool.connect();
  try {
    await client.query('SELECT pg_advisory_lock(724001)');
    await migrate(handle.db as never, { migrationsFolder });
    const unknown = await unknownMigrationCount(client);
    if (unknown > 0) throw new SchemaNewerThanReleaseError(unknown);
  } finally {
    await client.query('SELECT pg_advisory_unlock(724001)').catch(() => {});
    client.release();
  }
}

/**
 * How many migrations recorded in `drizzle.__drizzle_migrations` (drizzle's default table; one row
 * per applied migration, `created_at` = the journal entry's `when` in ms) this build's journal
 * (`migrations/meta/_journal.json`, read now, so a build's own new migrations count as known) does
 * not have: those later than its newest entry, or the rows beyond its entry count, whichever is
 * more. Drizzle's migrator compares only the newest `created_at`, so it applies nothing to such a
 * database and says nothing.
 */
async function unknownMigrationCount(client: pg.PoolClient): Promise<number> {
  const journal = readMigrationFiles({ migrationsFolder });
  const newest = Math.max(0, ...journal.map((migration) => migration.folderMillis));
  const { rows } = await client.query<{ total: number; later: number }>(
    `select count(*)::int as total, count(*) filter (where created_at > $1)::int as later
     from drizzle.__drizzle_migrations`,
    [newest],
  );
  const { total, later } = rows[0] ?? { total: 0, later: 0 };
  return Math.max(later, total - journal.length);
}

/**
 * Ends `pool`: idle connections close at once, checked-out ones when released. Those of
 * `connections` still open after `timeoutMs` are cut (their queries fail), and after one more
 * second the pool is left as it is, so this always resolves within `timeoutMs` + 1 s.
 */
async function endPool(pool: pg.Pool, connections: Set<pg.Client>, timeoutMs: number): Promise<void> {
  const ended = pool.end().then(
    () => true,
    () => true,
  );
  if (await settlesWithin(ended, timeoutMs)) return;
  // A client with a query in progress is destroyed by end() (pg: "a hung query could block end
  // forever"); the query fails, its holder releases it, and the pool finishes ending.
  for (const client of connections) void client.end().catch(() => {});
  await settlesWithin(ended, 1_000);
}

/** Whether `promise` settles within `ms` milliseconds (the timer does not keep the process alive). */
function settlesWithin(promise: Promise<unknown>, ms: number): Promise<boolean> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<false>((resolve) => {
    timer = setTimeout(() => resolve(false), ms);
    timer.unref();
  });
  return Promise.race([promise.then(() => true), timeout]).finally(() => clearTimeout(timer));
}

/**
 * True when `select 1` answers within {@link READY_CHECK_TIMEOUT_MS} (used by `/readyz`, which
 * answers 503 SERVICE_UNAVAILABLE otherwise). On the application pool the query also carries that
 * deadline (pg's `query_timeout`), so a connection stuck on a stalled server is dropped rather than
 * kept checked out: without a bound each probe during a stall left one more request hanging, and
 * the pool's close waited for them (review finding, session 18).
 */
export async function isDatabaseReachable(db: Database): Promise<boolean> {
  // Drizzle's node-postgres database exposes its pool as `$client` (drizzle docs, "Accessing the driver").
  const pool = (db as { $client?: unknown }).$client;
  // `query_timeout` per query is read by pg's Client.query but missing from @types/pg's QueryConfig.
  const query = { text: 'select 1', query_timeout: READY_CHECK_TIMEOUT_MS } as pg.QueryConfig;
  const check: Promise<unknown> =
    pool instanceof pg.Pool ? pool.query(query) : Promise.resolve(db.execute(sql`select 1`));
  try {
    return await settlesWithin(check, READY_CHECK_TIMEOUT_MS);
  } catch {
    return false;
  } finally {
    // A check that lost the race fails later (its deadline): nobody awaits it any more.
    check.catch(() => {});
  }
}
