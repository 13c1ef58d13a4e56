import { randomBytes } from 'node:crypto';
import pg from 'pg';
import { type DatabaseHandle, migrateDatabase, openDatabase } from '../../src/db/client.ts';

export type DatabaseKind = 'pglite' | 'postgres';

/**
 * The server for PostgreSQL tests. CI sets TEST_DATABASE_URL (see .ci/run); locally it defaults to the
 * machine's PostgreSQL. Tests create their own database on it and drop it afterwards.
 */
export const TEST_DATABASE_URL =
  process.env.TEST_DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/postgres';

/** A fresh, migrated database of `kind`, plus `drop()` which closes and removes it. */
export async function createTestDatabase(
  kind: DatabaseKind,
  options: { dataDir?: string } = {},
): Promise<{ handle: DatabaseHandle; url?: string; drop: () => Promise<void> }> {
  if (kind === 'pglite') {
    const handle = await openDatabase({ dataDir: options.dataDir ?? 'memory://' });
    await migrateDatabase(handle);
    return { handle, drop: () => handle.close() };
  }
  const name = `postwright_test_${Date.now()}_${randomBytes(4).toString('hex')}`;
  const admin = new pg.Client({ connectionString: TEST_DATABASE_URL });
  await admin.connect();
  await admin.query(`CREATE DATABASE ${name}`);
  await admin.end();
  const url = new URL(TEST_DATABASE_URL);
  url.pathname = `/${name}`;
  const handle = await openDatabase({ databaseUrl: url.toString(), dataDir: 'memory://', poolSize: 5 });
  await migrateDatabase(handle);
  return {
    handle,
    url: url.toString(),
    drop: async () => {
      await handle.close().catch(() => {});
      const cleanup = new pg.Client({ connectionString: TEST_DATABASE_URL });
      await cleanup.connect();
      await cleanup.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
      await cleanup.end();
    },
  };
}
