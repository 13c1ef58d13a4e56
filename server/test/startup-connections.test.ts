import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadConfig } from '../src/config.ts';
import { JobQueue } from '../src/jobs/queue.ts';
import { type Running, startPostwright } from '../src/runtime.ts';
import { createTestDatabase } from './helpers/database.ts';

/**
 * Issue #9, idle memory: once start-up's queries are done, `startPostwright` closes pg-boss's idle
 * connection, so the pollers that run for the process's life use a fresh PostgreSQL backend
 * instead of the one that holds the caches of the migrations and the queue declarations.
 */
describe('start-up connections', () => {
  let database: Awaited<ReturnType<typeof createTestDatabase>>;
  let running: Running | undefined;
  const dataDir = mkdtempSync(path.join(tmpdir(), 'postwright-startup-connections-'));
  /** Backends of pg-boss's pool (application_name pgboss) in the test's database, seen by `pg_stat_activity`. */
  const queueBackends = async () => {
    const observer = new pg.Client({ connectionString: database.url });
    await observer.connect();
    try {
      const { rows } = await observer.query<{ pid: number }>(
        "select pid from pg_stat_activity where application_name = 'pgboss' and datname = current_database()",
      );
      return rows.map((row) => row.pid);
    } finally {
      await observer.end();
    }
  };

  beforeAll(async () => {
    database = await createTestDatabase();
  });
  afterAll(async () => {
    await running?.stop();
    await database?.drop();
    rmSync(dataDir, { recursive: true, force: true });
  });

  it("closes pg-boss's start-up connection before the workers start polling", async () => {
    const seenAtClose: number[][] = [];
    const original = JobQueue.prototype.closeIdleConnections;
    JobQueue.prototype.closeIdleConnections = async function (this: JobQueue) {
      seenAtClose.push(await queueBackends());
      return original.call(this);
    };
    try {
      const config = loadConfig({
        DATABASE_URL: database.url,
        ENCRYPTION_KEY: randomBytes(32).toString('base64'),
        DATA_DIR: dataDir,
        PORT: '0',
        HOST: '127.0.0.1',
        BASE_URL: 'http://localhost:3000',
        LOG_LEVEL: 'warn',
      });
      running = await startPostwright(config, 'all');
    } finally {
      JobQueue.prototype.closeIdleConnections = original;
    }
    expect(seenAtClose).toHaveLength(1);
    const startupBackends = seenAtClose[0]!;
    expect(startupBackends.length).toBeGreaterThan(0);
    // The workers poll on a new backend; the start-up ones have ended.
    await new Promise((resolve) => setTimeout(resolve, 1_500));
    const idleBackends = await queueBackends();
    expect(idleBackends.length).toBeGreaterThan(0);
    expect(idleBackends.filter((pid) => startupBackends.includes(pid))).toEqual([]);
  });
});
