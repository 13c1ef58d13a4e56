import { randomBytes } from 'node:crypto';
import pg from 'pg';
import { inject } from 'vitest';
import { type DatabaseHandle, migrateDatabase, openDatabase } from '../../src/db/client.ts';

/** The one engine tests run on; kept as a parameter so call sites read `createTestContext('postgres')`. */
export type DatabaseKind = 'postgres';

/**
 * The server for the tests, chosen once per run by server/test/global-setup.ts: TEST_DATABASE_URL,
 * else the machine's PostgreSQL on 127.0.0.1:5432, else an embedded PostgreSQL started for the run.
 * Tests create their own database on it and drop it afterwards.
 */
export const TEST_DATABASE_URL = inject('testDatabaseUrl');

/** A fresh, migrated database, plus `drop()` which closes and removes it. */
export async function createTestDatabase(
  _kind: DatabaseKind = 'postgres',
): Promise<{ handle: DatabaseHandle; url: string; drop: () => Promise<void> }> {
  const name = `postwright_test_${Date.now()}_${randomBytes(4).toString('hex')}`;
  const admin = new pg.Client({ connectionString: TEST_DATABASE_URL });
  await admin.connect();
  await admin.query(`CREATE DATABASE ${name}`);
  await admin.end();
  const url = new URL(TEST_DATABASE_URL);
  url.pathname = `/${name}`;
  const handle = await openDatabase({ databaseUrl: url.toString(), poolSize: 5 });
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
