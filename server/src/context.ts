import type { FastifyBaseLogger } from 'fastify';
import { type DestinationStream, pino } from 'pino';
import type { Config } from './config.ts';
import type { Database, DatabaseHandle } from './db/client.ts';
import { AppError } from './http/errors.ts';
import { redactUrl } from './http/log-redaction.ts';
import type { JobQueue } from './jobs/queue.ts';
import { type AdapterSendCache, createAdapterSendCache } from './modules/adapters/index.ts';
import {
  type ApiKeyCache,
  createApiKeyCache,
  createUnknownKeyThrottle,
  type UnknownKeyThrottle,
} from './modules/api-keys/index.ts';
import { withSetupToken } from './modules/auth/index.ts';
import { type AcceptBatcher, createAcceptBatcher } from './modules/emails/index.ts';
import { createPdfRenderer, type PdfRenderer } from './modules/pdf/index.ts';
import { createFileStorage, type FileStorage } from './modules/storage/index.ts';
import { createTemplateSendCache, type TemplateSendCache } from './modules/templates/index.ts';
import type { OutboundPolicy } from './outbound/index.ts';
import { ProviderCache } from './providers/index.ts';

/** Where "now" comes from; the real clock in the process, a fixed one in a test that needs it. */
export interface Clock {
  now(): Date;
}

/** The system clock. */
export const systemClock: Clock = { now: () => new Date() };

/** What {@link createContext} is built from: what the process opened before (database, queue). */
export interface ContextDeps {
  /** The configuration; the context's copy has its setup token settled (see withSetupToken). */
  config: Config;
  database: DatabaseHandle;
  /** The started queue over `database`. */
  queue: JobQueue;
  /** 32-byte key for adapter configs at rest (AES-256-GCM). */
  encryptionKey: Buffer;
  /** Where the logger writes; stdout when absent (tests read the logs through it). */
  logStream?: DestinationStream | undefined;
  /** Defaults to {@link systemClock}. */
  clock?: Clock | undefined;
  /**
   * Whether this process may run the bundled PDF renderer when PDF_RENDERER_URL is unset and
   * Chromium is found (`postwright start`, issue #12); tests leave it off unless they test it.
   */
  bundledPdfRenderer?: boolean | undefined;
}

/**
 * Everything the API and the worker share, built once per process by {@link createContext} (issue
 * #9 "One composition root"): nothing of it is module state, so two contexts in one process (two
 * apps in one test) share no cache, batcher, pool or setup token.
 */
export interface Context {
  /** With SETUP_TOKEN always set (configured, or generated for this context). */
  config: Config & { SETUP_TOKEN: string };
  /** pino; Fastify's logger type, so the app logs through it (`loggerInstance`). */
  logger: FastifyBaseLogger;
  clock: Clock;
  database: DatabaseHandle;
  /** `database.db`, for the code that takes the Drizzle database alone (job handlers, services). */
  db: Database;
  queue: JobQueue;
  encryptionKey: Buffer;
  /** Uploaded files (local disk or S3): the API's uploads and, later, the worker's attachments. */
  storage: FileStorage;
  /** What outbound connections may reach (SMTP_ALLOW_PRIVATE; issue #8). */
  outbound: OutboundPolicy;
  /**
   * Where PDF attachments and template thumbnails are rendered (issue #12), or undefined when no
   * renderer is configured (a requested PDF is then PDF_NOT_CONFIGURED).
   */
  pdf: PdfRenderer | undefined;
  /** Open providers, one connection pool per adapter (worker deliveries, invitation emails). */
  providers: ProviderCache;
  /** Group commit of accepted sends over `db` (issue #9 "Group-commit accept"). */
  acceptBatcher: AcceptBatcher;
  /** The short-lived read caches of the hot path (issue #9 "Cheap hot path"). */
  caches: {
    /** Verified API keys, for at most API_KEY_CACHE_TTL_MS. */
    apiKeys: ApiKeyCache;
    /** Each client's lookups of unknown API keys this minute (UNKNOWN_KEYS_PER_MINUTE). */
    unknownApiKeys: UnknownKeyThrottle;
    /** Templates resolved for sending, for at most TEMPLATE_SEND_CACHE_TTL_MS. */
    templatesForSend: TemplateSendCache;
    /** Each team's sending adapter, for at most ADAPTER_SEND_CACHE_TTL_MS. */
    adaptersForSend: AdapterSendCache;
  };
  /**
   * Aborted by {@link cutRequests}: what requests in progress wait for ends at once (their PDF
   * renders, createPdfRenderer's `requestsCut`).
   */
  requestsCut: AbortSignal;
  /**
   * Called by a stopping server when it cuts the connections of the requests still in progress
   * (runtime.ts closeWithin, once its grace has passed): aborts {@link requestsCut} with a
   * SERVICE_UNAVAILABLE "server is stopping" reason, so the handlers of those requests fail at once
   * and release their Idempotency-Key claims (withIdempotency) before the database closes; a slow
   * PDF_RENDERER_URL kept them waiting past the process's end and the key claimed, a retry
   * answered 409 IN_PROGRESS for 5 minutes (review finding, "stop"). Idempotent.
   */
  cutRequests(): void;
  /**
   * Waits for the accept batcher to commit what it holds, closes every provider and the storage.
   * Call after the app and the workers stopped and before the database closes (the database and
   * queue belong to whoever opened them). Idempotent.
   */
  close(): Promise<void>;
}

/**
 * The logger of a context: pino at LOG_LEVEL, with Fastify's request/response serializers, except
 * that request URLs are redacted (setup token, invitation tokens stay out of the logs).
 */
function createLogger(
  config: Pick<Config, 'LOG_LEVEL'>,
  stream: DestinationStream | undefined,
): FastifyBaseLogger {
  const options = {
    level: config.LOG_LEVEL,
    serializers: {
      req: (request: { method: string; url: string; host: string; ip: string }) => ({
        method: request.method,
        url: redactUrl(request.url),
        host: request.host,
        remoteAddress: request.ip,
      }),
      res: (reply: { statusCode: number }) => ({ statusCode: reply.statusCode }),
      err: pino.stdSerializers.err,
    },
  };
  return stream ? pino(options, stream) : pino(options);
}

/**
 * Builds the one context of a process (composition root, with runtime.ts, app.ts and
 * job-handlers.ts): `buildApp(context)` serves the API over it and `bindJobHandlers(context)` the
 * workers, so both reach the same storage, caches and providers.
 * @throws whatever the storage backend throws when it cannot be set up (e.g. an unwritable DATA_DIR).
 */
export async function createContext(deps: ContextDeps): Promise<Context> {
  const config = withSetupToken(deps.config);
  const storage = await createFileStorage(config);
  // A replaced provider's sends end by their deadline; the margin covers a send's connection wait.
  const providers = new ProviderCache(undefined, (config.SEND_TIMEOUT_SECONDS + 30) * 1000);
  const acceptBatcher = createAcceptBatcher({ db: deps.database.db, queue: deps.queue });
  const requestsCut = new AbortController();
  const pdf = createPdfRenderer(config, {
    bundled: deps.bundledPdfRenderer ?? false,
    requestsCut: requestsCut.signal,
  });
  let closing: Promise<void> | undefined;
  return {
    config,
    logger: createLogger(config, deps.logStream),
    clock: deps.clock ?? systemClock,
    database: deps.database,
    db: deps.database.db,
    queue: deps.queue,
    encryptionKey: deps.encryptionKey,
    storage,
    outbound: { allowPrivate: config.SMTP_ALLOW_PRIVATE },
    pdf,
    providers,
    acceptBatcher,
    caches: {
      apiKeys: createApiKeyCache(),
      unknownApiKeys: createUnknownKeyThrottle(),
      templatesForSend: createTemplateSendCache(),
      adaptersForSend: createAdapterSendCache(),
    },
    requestsCut: requestsCut.signal,
    cutRequests() {
      if (requestsCut.signal.aborted) return;
      requestsCut.abort(new AppError('SERVICE_UNAVAILABLE', 'The server is stopping: the request was cut'));
    },
    close() {
      closing ??= (async () => {
        await acceptBatcher.drain();
        await providers.closeAll();
        await storage.close();
        await pdf?.close();
      })();
      return closing;
    },
  };
}
