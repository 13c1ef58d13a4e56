import { execFileSync, spawn } from 'node:child_process';
import { chmodSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import pg from 'pg';
import { afterAll, describe, expect, it } from 'vitest';
import { type EmbeddedPostgres, EmbeddedPostgresError, startEmbeddedPostgres } from './embedded-postgres.ts';

/** A DATA_DIR the server's OS user can enter (as root it runs as "postgres"). */
function temporaryDataDir(): string {
  const dir = mkdtempSync(path.join(tmpdir(), 'postwright-embedded-'));
  chmodSync(dir, 0o755);
  return dir;
}

async function query(connectionString: string, text: string): Promise<Record<string, unknown>[]> {
  const client = new pg.Client({ connectionString });
  await client.connect();
  try {
    return (await client.query(text)).rows;
  } finally {
    await client.end();
  }
}

describe('embedded PostgreSQL', () => {
  const dirs: string[] = [];
  const servers: EmbeddedPostgres[] = [];
  const start = async (dataDir: string, options: { listen?: 'socket' | 'tcp' } = {}) => {
    const lines: string[] = [];
    const server = await startEmbeddedPostgres({ dataDir, ...options, log: (line) => lines.push(line) });
    servers.push(server);
    return { server, lines };
  };
  afterAll(async () => {
    await Promise.all(servers.map((s) => s.stop()));
    for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
  });

  it('listens on a Unix socket in pgdata only, with a generated password, and keeps data across restarts', async () => {
    const dataDir = temporaryDataDir();
    dirs.push(dataDir);
    const { server } = await start(dataDir);
    const url = new URL(server.connectionString);
    expect(url.searchParams.get('host')).toBe(path.join(dataDir, 'pgdata'));
    const password = readFileSync(path.join(dataDir, 'pgpassword'), 'utf8').trim();
    expect(password).toMatch(/^[0-9a-f]{48}$/);
    expect(decodeURIComponent(url.password)).toBe(password);
    const [settings] = await query(
      server.connectionString,
      "select current_setting('listen_addresses') as listen, current_setting('server_version_num') as version, lower('ÉCOLE') as lower",
    );
    expect(settings).toEqual({ listen: '', version: expect.stringMatching(/^17/), lower: 'école' });

    // scram-sha-256 everywhere: the socket alone does not let anyone in.
    const wrong = new URL(server.connectionString);
    wrong.password = 'not-the-password';
    await expect(query(wrong.toString(), 'select 1')).rejects.toThrow(/password authentication failed/);

    await query(server.connectionString, 'create table kept (n int); insert into kept values (42)');
    await server.stop();
    const again = (await start(dataDir)).server;
    expect(await query(again.connectionString, 'select n from kept')).toEqual([{ n: 42 }]);
    await again.stop();
  });

  it('listens on a free 127.0.0.1 port when asked for TCP (the test run’s server)', async () => {
    const dataDir = temporaryDataDir();
    dirs.push(dataDir);
    const { server } = await start(dataDir, { listen: 'tcp' });
    const url = new URL(server.connectionString);
    expect(url.hostname).toBe('127.0.0.1');
    expect(Number(url.port)).toBeGreaterThan(0);
    expect(await query(server.connectionString, "select current_setting('listen_addresses') as l")).toEqual([
      { l: '127.0.0.1' },
    ]);
    await server.stop();
  });

  it('removes a stale postmaster.pid whose PID now belongs to another program', async () => {
    const dataDir = temporaryDataDir();
    dirs.push(dataDir);
    await (await start(dataDir)).server.stop();
    // A live process that is no PostgreSQL, as after a crash and PID reuse, of the server's own OS
    // user: PostgreSQL itself ignores a lock file naming its parent or another user's process.
    const account =
      process.getuid?.() === 0
        ? {
            uid: Number(execFileSync('id', ['-u', 'postgres'], { encoding: 'utf8' })),
            gid: Number(execFileSync('id', ['-g', 'postgres'], { encoding: 'utf8' })),
          }
        : {};
    const other = spawn('sleep', ['60'], { stdio: 'ignore', ...account });
    try {
      const lockFile = path.join(dataDir, 'pgdata', 'postmaster.pid');
      writeFileSync(lockFile, `${other.pid}\n${path.join(dataDir, 'pgdata')}\n`);
      const { server, lines } = await start(dataDir);
      expect(lines.join('\n')).toContain(`its PID ${other.pid} now belongs to another program`);
      expect(await query(server.connectionString, 'select 1 as one')).toEqual([{ one: 1 }]);
      await server.stop();
    } finally {
      other.kill();
    }
  });

  it('refuses a second start on a DATA_DIR this process already serves', async () => {
    const dataDir = temporaryDataDir();
    dirs.push(dataDir);
    const { server } = await start(dataDir);
    await expect(start(dataDir)).rejects.toThrow(`in use by Postwright process ${process.pid}`);
    expect(await query(server.connectionString, 'select 1 as one')).toEqual([{ one: 1 }]);
    await server.stop();
  });

  it('refuses, not stops, a running server whose postgres.owner is gone while its Node.js parent lives', async () => {
    // Review finding, session 15: a start that lost a race removed the winner's owner file, and the
    // next start stopped the winner's server under it as an orphan.
    const dataDir = temporaryDataDir();
    dirs.push(dataDir);
    const { server } = await start(dataDir);
    rmSync(path.join(dataDir, 'postgres.owner'));
    await expect(start(dataDir)).rejects.toThrow(`in use by Postwright process ${process.pid}`);
    expect(await query(server.connectionString, 'select 1 as one')).toEqual([{ one: 1 }]);
    await server.stop();
  });

  it('refuses a pgdata that is no cluster, of another major version (PGlite), or whose password file is gone', async () => {
    const foreign = temporaryDataDir();
    dirs.push(foreign);
    mkdirSync(path.join(foreign, 'pgdata'));
    writeFileSync(path.join(foreign, 'pgdata', 'something'), 'not PostgreSQL');
    const refusal = start(foreign);
    await expect(refusal).rejects.toBeInstanceOf(EmbeddedPostgresError);
    await expect(refusal).rejects.toThrow('holds no PostgreSQL cluster');

    // What a PGlite-era Postwright left in DATA_DIR/pgdata: a PostgreSQL 18 (WebAssembly) cluster.
    const pglite = temporaryDataDir();
    dirs.push(pglite);
    mkdirSync(path.join(pglite, 'pgdata'));
    writeFileSync(path.join(pglite, 'pgdata', 'PG_VERSION'), '18\n');
    await expect(start(pglite)).rejects.toThrow(
      /holds a PostgreSQL 18 database, but the embedded server is PostgreSQL 17: move it away/,
    );

    const orphaned = temporaryDataDir();
    dirs.push(orphaned);
    await (await start(orphaned)).server.stop();
    rmSync(path.join(orphaned, 'pgpassword'));
    await expect(start(orphaned)).rejects.toThrow(/pgpassword is missing/);
  });
});
