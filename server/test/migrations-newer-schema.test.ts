import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestDatabase } from './helpers/database.ts';
import { TEST_ENCRYPTION_KEY } from './helpers/encryption-key.ts';
import { freePort } from './helpers/ports.ts';
import { startCli } from './helpers/process.ts';

const NEWER =
  /^The database schema is newer than this release \(1 migration it does not know\): run the release that migrated it\.$/;

/**
 * Review finding (integrity 4): drizzle's migrator compares only the newest `created_at` of
 * `drizzle.__drizzle_migrations` with the journal, so a database a newer release had migrated was
 * used silently: `migrate` said "Migrations applied." and `start` served on a schema its code was not
 * written for. Both now refuse with one line, and an up-to-date database still migrates.
 */
describe('a database migrated by a newer release', () => {
  let database: Awaited<ReturnType<typeof createTestDatabase>>;
  const env = () => ({
    DATABASE_URL: database.url,
    ENCRYPTION_KEY: TEST_ENCRYPTION_KEY.toString('base64'),
    DATA_DIR: 'memory://',
    LOG_LEVEL: 'warn',
  });
  /** Runs the CLI to its exit; the exit code and everything it printed. */
  const run = async (args: string[], extra: Record<string, string> = {}) => {
    const cli = startCli(args, { ...env(), ...extra });
    // A `start` that does not refuse serves until stopped: stop it once it says so.
    const listening = cli.waitForOutput(/listening on/, 110_000).then(
      () => cli.stop(),
      () => undefined,
    );
    const code = await new Promise<number | null>((resolve) => cli.child.once('exit', resolve));
    await listening;
    return { code, output: cli.output().trim() };
  };
  const recorded = async () =>
    (
      await database.handle.pool.query<{ created_at: string }>(
        'select created_at from drizzle.__drizzle_migrations order by created_at',
      )
    ).rows.map((row) => Number(row.created_at));

  beforeAll(async () => {
    database = await createTestDatabase();
  });
  afterAll(() => database?.drop());

  it('an up-to-date database: migrate applies nothing and succeeds', async () => {
    const before = await recorded();
    const result = await run(['migrate']);
    expect(result.code, result.output).toBe(0);
    expect(result.output).toBe('Migrations applied.');
    expect(await recorded()).toEqual(before);
  }, 120_000);

  it('one migration later than this build: migrate exits 1 and start refuses, each with one line', async () => {
    // What a newer release's migration leaves: its row, later than this build's newest.
    const newest = Math.max(...(await recorded()));
    await database.handle.pool.query(
      `insert into drizzle.__drizzle_migrations (hash, created_at) values ('from-a-newer-release', $1)`,
      [newest + 60_000],
    );
    try {
      const migrate = await run(['migrate']);
      expect(migrate.code, migrate.output).toBe(1);
      expect(migrate.output).toMatch(NEWER);
      expect(migrate.output).not.toContain('Migrations applied.');

      const start = await run(['start', '--role', 'api'], {
        HOST: '127.0.0.1',
        PORT: String(await freePort()),
      });
      expect(start.code, start.output).toBe(1);
      expect(start.output).toMatch(NEWER);
      expect(start.output).not.toContain('listening on');
    } finally {
      await database.handle.pool.query(
        `delete from drizzle.__drizzle_migrations where hash = 'from-a-newer-release'`,
      );
    }
  }, 120_000);

  it('more migrations recorded than this build has: refused as well', async () => {
    // A migration this build never had, recorded with an earlier time (another branch's release).
    await database.handle.pool.query(
      `insert into drizzle.__drizzle_migrations (hash, created_at) values ('from-another-release', 1)`,
    );
    try {
      const migrate = await run(['migrate']);
      expect(migrate.code, migrate.output).toBe(1);
      expect(migrate.output).toMatch(NEWER);
    } finally {
      await database.handle.pool.query(
        `delete from drizzle.__drizzle_migrations where hash = 'from-another-release'`,
      );
    }
    const again = await run(['migrate']);
    expect(again.code, again.output).toBe(0);
  }, 120_000);
});
