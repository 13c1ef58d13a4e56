import { chmod, mkdtemp, rm } from 'node:fs/promises';
import { Socket } from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import pg from 'pg';
import type { TestProject } from 'vitest/node';
import { type EmbeddedPostgres, startEmbeddedPostgres } from '../src/db/embedded-postgres.ts';

declare module 'vitest' {
  export interface ProvidedContext {
    /** The PostgreSQL server tests create their databases on (see server/test/helpers/database.ts). */
    testDatabaseUrl: string;
    /** The Redis for the tests that need one; null when none is reachable (those tests are skipped). */
    testRedisUrl: string | null;
  }
}

const LOCAL_POSTGRES = 'postgres://postgres@127.0.0.1:5432/postgres';
const LOCAL_REDIS = 'redis://127.0.0.1:6379';

/**
 * Chooses the services of the test run once, for every test file (vitest `provide`/`inject`; the
 * URL is also exported as TEST_DATABASE_URL to the workers):
 * - PostgreSQL: TEST_DATABASE_URL when set (CI); else the machine's server on 127.0.0.1:5432 when it
 *   answers; else (or with TEST_DATABASE_URL=embedded) one embedded PostgreSQL in a temporary
 *   directory, stopped and removed at the end of the run.
 * - Redis: TEST_REDIS_URL when set (CI: a failure to reach it fails those tests); else
 *   127.0.0.1:6379 when it answers PING; else none, and the tests that need it are skipped.
 */
export default async function setup(project: TestProject): Promise<() => Promise<void>> {
  const database = await chooseDatabase();
  process.env.TEST_DATABASE_URL = database.url;
  project.provide('testDatabaseUrl', database.url);

  const redisUrl = process.env.TEST_REDIS_URL ?? ((await answersPing(LOCAL_REDIS)) ? LOCAL_REDIS : null);
  if (!redisUrl) {
    console.log(
      `Redis: nothing answered at ${LOCAL_REDIS}, so the tests that need Redis are SKIPPED (start Redis there or set TEST_REDIS_URL to run them).`,
    );
  }
  project.provide('testRedisUrl', redisUrl);
  return () => database.stop();
}

async function chooseDatabase(): Promise<{ url: string; stop: () => Promise<void> }> {
  const configured = process.env.TEST_DATABASE_URL;
  if (configured && configured !== 'embedded') return { url: configured, stop: async () => {} };
  if (!configured) {
    const refusal = await connectionRefusal(LOCAL_POSTGRES);
    if (!refusal) return { url: LOCAL_POSTGRES, stop: async () => {} };
    console.log(
      `PostgreSQL: ${LOCAL_POSTGRES} did not answer (${refusal}); starting an embedded PostgreSQL for this run.`,
    );
  }
  const dataDir = await mkdtemp(path.join(tmpdir(), 'postwright-test-pg-'));
  // As root the server runs as the "postgres" user, which must be able to enter the directory.
  await chmod(dataDir, 0o755);
  let server: EmbeddedPostgres;
  try {
    server = await startEmbeddedPostgres({
      dataDir,
      listen: 'tcp',
      // A throw-away server: durability buys nothing here and costs time.
      settings: { fsync: 'off', synchronous_commit: 'off', full_page_writes: 'off', max_connections: '200' },
      log: (line) => console.log(line),
    });
  } catch (error) {
    await rm(dataDir, { recursive: true, force: true });
    throw error;
  }
  console.log(`PostgreSQL: embedded server (PID ${server.pid}) in ${dataDir}.`);
  return {
    url: server.connectionString,
    stop: async () => {
      await server.stop();
      await rm(dataDir, { recursive: true, force: true });
    },
  };
}

/** Undefined when `url` accepts a connection and a query within 3 s; otherwise why not. */
async function connectionRefusal(url: string): Promise<string | undefined> {
  const client = new pg.Client({ connectionString: url, connectionTimeoutMillis: 3_000 });
  client.on('error', () => {});
  try {
    await client.connect();
    await client.query('select 1');
    return undefined;
  } catch (error) {
    return (error as NodeJS.ErrnoException).code ?? (error as Error).message;
  } finally {
    await client.end().catch(() => {});
  }
}

/** True when a Redis server at `url` answers PING within 1 s. */
async function answersPing(url: string): Promise<boolean> {
  const { hostname, port } = new URL(url);
  return new Promise((resolve) => {
    const socket = new Socket();
    const done = (answer: boolean) => {
      socket.destroy();
      resolve(answer);
    };
    socket.setTimeout(1_000, () => done(false));
    socket.once('error', () => done(false));
    socket.once('data', (data) => done(data.toString().startsWith('+PONG')));
    socket.connect(Number(port || 6379), hostname, () => socket.write('PING\r\n'));
  });
}
