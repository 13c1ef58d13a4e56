import type { FastifyInstance } from 'fastify';
import type { DestinationStream } from 'pino';
import { vi } from 'vitest';
import { buildApp } from '../../src/app.ts';
import { type Config, loadConfig } from '../../src/config.ts';
import { type Context, createContext } from '../../src/context.ts';
import { bindJobHandlers } from '../../src/job-handlers.ts';
import { JobQueue } from '../../src/jobs/queue.ts';
import { declareQueues, startWorkers } from '../../src/jobs/registry.ts';
import { createTestDatabase, type DatabaseKind } from './database.ts';
import { TEST_ENCRYPTION_KEY } from './encryption-key.ts';

/** The origin tests send on cookie requests that change state (BASE_URL of the test config). */
export const TEST_BASE_URL = 'http://localhost:3000';

export interface TestContext {
  app: FastifyInstance;
  /** The context the app and the workers are built over (what createContext made). */
  context: Context;
  config: Config;
  queue: JobQueue;
  /** Starts the job workers in this process (tests that need delivery). */
  startWorkers(): Promise<void>;
  close(): Promise<void>;
}

/**
 * Boots the real app on a fresh PostgreSQL database (created on the run's server, dropped by
 * `close()`), with the real queue. Workers are not started until asked, so tests can look at queued state.
 * `options.logStream` receives the app's log lines (set LOG_LEVEL in `env` too);
 * `options.bundledPdfRenderer` lets the context run the bundled PDF renderer as `postwright start` does.
 */
export async function createTestContext(
  kind: DatabaseKind,
  env: Record<string, string> = {},
  options: { logStream?: DestinationStream; bundledPdfRenderer?: boolean } = {},
): Promise<TestContext> {
  const { handle, drop } = await createTestDatabase(kind);
  const config = loadConfig({
    BASE_URL: TEST_BASE_URL,
    LOG_LEVEL: 'silent',
    DATA_DIR: 'memory://',
    SEND_RETRY_DELAY_SECONDS: '1',
    SETUP_TOKEN: 'test-setup-token-0123456789',
    // The test SMTP servers listen on 127.0.0.1; tests of the outbound policy pass '' to unset it.
    SMTP_ALLOW_PRIVATE: 'true',
    ...env,
  });
  const encryptionKey = TEST_ENCRYPTION_KEY;
  const queue = new JobQueue(handle);
  await queue.start();
  await declareQueues(queue, config);
  const context = await createContext({ config, database: handle, queue, encryptionKey, ...options });
  const app = await buildApp(context);
  await app.ready();
  return {
    app,
    context,
    config,
    queue,
    startWorkers: () => startWorkers(queue, config, bindJobHandlers(context)),
    async close() {
      await app.close();
      await queue.stop(2_000);
      await context.close();
      await drop();
    },
  };
}

/**
 * Polls `check` every 100 ms (vitest's `vi.waitFor`) until it returns a value other than undefined,
 * and returns that value; fails after `timeoutMs` naming `what`.
 */
export function waitFor<T>(
  check: () => Promise<T | undefined>,
  timeoutMs = 20_000,
  what = 'condition',
): Promise<T> {
  return vi.waitFor(
    async () => {
      const value = await check();
      if (value === undefined) throw new Error(`Timed out after ${timeoutMs} ms waiting for ${what}`);
      return value;
    },
    { timeout: timeoutMs, interval: 100 },
  );
}
