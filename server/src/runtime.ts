import type { FastifyInstance, FastifyRequest } from 'fastify';
import { buildApp } from './app.ts';
import type { Config, Role } from './config.ts';
import { type Context, createContext } from './context.ts';
import { type DatabaseHandle, migrateDatabase, openDatabase } from './db/client.ts';
import { checkEncryptionKeyReadsDatabase, resolveEncryptionKey } from './encryption-key.ts';
import { AppError } from './http/errors.ts';
import { bindJobHandlers } from './job-handlers.ts';
import { JobQueue } from './jobs/queue.ts';
import { declareQueues, startWorkers } from './jobs/registry.ts';
import { upgradeLegacyAdapterConfigs } from './modules/adapters/index.ts';
import { printSetupUrlIfNeeded } from './modules/auth/index.ts';

/** A running Postwright process: what `postwright start` holds until it is stopped. */
export interface Running {
  /** The process's one context, shared by the API and the workers. */
  context: Context;
  database: DatabaseHandle;
  queue: JobQueue;
  app?: FastifyInstance;
  /** The address the API listens on, when this role serves HTTP. */
  url?: string;
  stop(): Promise<void>;
}

/**
 * Opens the database (starting the embedded PostgreSQL when DATABASE_URL is unset), applies
 * migrations, checks that the encryption key reads the stored adapter configs and webhook secrets
 * (checkEncryptionKeyReadsDatabase: none read throws ConfigError, or warns and goes on with
 * ENCRYPTION_KEY_CHECK=warn), starts the queue, builds the one
 * context (context.ts) then the API over it (roles all, api) and the workers over it (roles all,
 * worker).
 * `stop()` undoes it in reverse order, the embedded server last.
 */
export async function startPostwright(config: Config, role: Role = 'all'): Promise<Running> {
  const encryptionKey = resolveEncryptionKey(config);
  const database = await openDatabase({ databaseUrl: config.DATABASE_URL, dataDir: config.DATA_DIR });
  const queue = new JobQueue(database);
  let context: Context;
  try {
    await migrateDatabase(database);
    // Before anything is served or sent: a key that reads none of the stored configs and secrets
    // refuses to start (review finding, integrity 3), unless ENCRYPTION_KEY_CHECK=warn.
    await checkEncryptionKeyReadsDatabase(database.db, encryptionKey, config);
    // Adapter configs written before issue #8 get bound to their row (AES-GCM associated data).
    await upgradeLegacyAdapterConfigs(database.db, encryptionKey);
    await queue.start();
    await declareQueues(queue, config);
    context = await createContext({ config, database, queue, encryptionKey, bundledPdfRenderer: true });
  } catch (error) {
    await queue.stop(0).catch(() => {});
    await database.close();
    throw error;
  }

  let app: FastifyInstance | undefined;
  let handlers: HandlerTracker | undefined;
  let url: string | undefined;
  if (role !== 'worker') {
    try {
      app = await buildApp(context);
      handlers = trackHandlers(app);
      url = await app.listen({ port: config.PORT, host: config.HOST });
    } catch (error) {
      // A port in use, a HOST not of this machine: what was opened closes, the embedded server
      // included (its owner file stayed for the next start to clear; review finding, session 18).
      await app?.close().catch(() => {});
      await queue.stop(0).catch(() => {});
      await context.close().catch(() => {});
      await database.close();
      throw error;
    }
    await printSetupUrlIfNeeded(app.ctx, { info: (line: string) => console.log(line) });
  }
  // Start-up's queries are done: its connection's backend (caches of the migrations and queue
  // declarations) is closed rather than kept by the pollers for the process's life (issue #9).
  await queue.closeIdleConnections();
  if (role !== 'api') {
    await startWorkers(queue, config, bindJobHandlers(context));
  }

  let stopping: Promise<void> | undefined;
  const stop = () => {
    stopping ??= (async () => {
      if (app) await closeWithin(app, SHUTDOWN_GRACE_MS);
      // The handlers of requests cut at the grace's end fail at once (Context.cutRequests) and
      // release their Idempotency-Key claims meanwhile; the database must still be open for that.
      await Promise.all([queue.stop(workerStopWaitMs(config)), handlers?.settled(HANDLER_SETTLE_MS)]);
      await context.close();
      await database.close();
    })();
    return stopping;
  };
  return { context, database, queue, app, url, stop };
}

/**
 * How long a stopping server lets its requests in progress finish before it closes their
 * connections (ms). Without a bound, one client holding a request open (a body announced but never
 * sent, trickled a byte at a time) kept a SIGTERM'd process running for as long as it liked, its
 * workers still claiming jobs (review finding, session 15).
 */
export const SHUTDOWN_GRACE_MS = 10_000;

/**
 * Longest wait of a stop for the handlers of requests whose connections it cut (ms), while the
 * workers stop (see startPostwright's `stop`): they fail at once (Context.cutRequests) and only
 * have to record it (release an Idempotency-Key, store an answer), so this bounds a stuck one.
 */
export const HANDLER_SETTLE_MS = 5_000;

/** Seconds a stopping worker adds to the longest request deadline to record what ended. */
const WORKER_STOP_MARGIN_SECONDS = 5;

/**
 * How long a stopping worker waits for the work it had started (ms): a send in progress may take
 * SEND_TIMEOUT_SECONDS, a webhook request WEBHOOK_TIMEOUT_SECONDS, then its outcome is recorded.
 * Emails still waiting for a connection slot and webhook deliveries not started go back at once
 * (nothing sent). Waited only 10 s, a stop cut slower sends, recorded as failed "may have been
 * delivered" (never retried), and left webhook requests unrecorded, sent again after a restart
 * (review finding, session 18). README "Command line": a service manager's stop timeout should
 * exceed it.
 */
function workerStopWaitMs(config: Config): number {
  return (
    (Math.max(config.SEND_TIMEOUT_SECONDS, config.WEBHOOK_TIMEOUT_SECONDS) + WORKER_STOP_MARGIN_SECONDS) *
    1000
  );
}

/**
 * Closes `app` (no new connections, requests in progress finish), cutting what is left after
 * `graceMs`; from then on no send is accepted (the accept batcher refuses new items with 503
 * SERVICE_UNAVAILABLE), so a request whose connection was cut has accepted nothing its client
 * cannot see — unless its email was already being committed when the grace ended. The PDF renders
 * the cut requests wait for are abandoned (Context.cutRequests), so their handlers end at once:
 * wait for them with {@link trackHandlers}' `settled` before the database closes. The same holds,
 * once `app` has closed, for the handlers still running whose clients hung up before the stop.
 */
export async function closeWithin(app: FastifyInstance, graceMs: number): Promise<void> {
  const cut = () => {
    app.ctx.acceptBatcher.refuseNew(
      new AppError('SERVICE_UNAVAILABLE', 'The server is stopping: the email was not accepted'),
    );
    app.ctx.cutRequests();
  };
  const timer = setTimeout(() => {
    cut();
    app.server.closeAllConnections();
  }, graceMs);
  try {
    await app.close();
  } finally {
    clearTimeout(timer);
    // Closed within the grace, a handler may still run whose client hung up before the stop (a
    // slow PDF render): it is cut the same way, or its render kept its Idempotency-Key claimed
    // past the database's close (review of session 20's diff).
    cut();
  }
}

/** The handlers of an app's requests in progress: see {@link trackHandlers}. */
export interface HandlerTracker {
  /** Handlers started and not yet ended. */
  readonly running: number;
  /** Resolves once no handler runs, or after `ms` (never rejects). */
  settled(ms: number): Promise<void>;
}

/**
 * Counts `app`'s requests whose handlers have not ended. Call before `app` is ready (it adds
 * hooks). A request counts from `onRequest` until its answer is being sent (`onSend`, which a
 * handler reaches when it returns or throws, its connection cut or not) or has been sent
 * (`onResponse`), or until its connection closes after a hijacked or finished answer. A cut
 * connection alone does not end it: its handler runs on (Fastify's `close()` does not wait for it),
 * and what it does last (releasing an Idempotency-Key) needs the database.
 */
export function trackHandlers(app: FastifyInstance): HandlerTracker {
  const running = new Set<FastifyRequest>();
  let idle: (() => void)[] = [];
  const end = (request: FastifyRequest) => {
    if (!running.delete(request) || running.size > 0) return;
    const waiting = idle;
    idle = [];
    for (const resolve of waiting) resolve();
  };
  app.addHook('onRequest', (request, reply, done) => {
    running.add(request);
    reply.raw.once('close', () => {
      if (reply.sent) end(request);
    });
    done();
  });
  app.addHook('onSend', (request, _reply, payload, done) => {
    end(request);
    done(null, payload);
  });
  app.addHook('onResponse', (request, _reply, done) => {
    end(request);
    done();
  });
  return {
    get running() {
      return running.size;
    },
    settled(ms) {
      if (running.size === 0) return Promise.resolve();
      return new Promise<void>((resolve) => {
        const timer = setTimeout(resolve, ms);
        idle.push(() => {
          clearTimeout(timer);
          resolve();
        });
      });
    },
  };
}
