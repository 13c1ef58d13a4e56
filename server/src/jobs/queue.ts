import { sql } from 'drizzle-orm';
import pg from 'pg';
import { fromDrizzle, type JobWithMetadata, PgBoss } from 'pg-boss';
import { type DatabaseHandle, type Executor, POOL_IDLE_TIMEOUT_MS } from '../db/client.ts';
import { frugalExecutor } from '../db/frugal-pool.ts';
import {
  type BatchHandler,
  type ClaimedJob,
  ClaimLoop,
  type ClaimLoopOptions,
  type JobSettler,
} from './claim-loop.ts';
import { groupOf, type JobName, type JobPayload, type RetryPolicy } from './definitions.ts';

export { type BatchHandler, type ClaimedJob, type JobSettler, SETTLED } from './claim-loop.ts';

/**
 * Thrown by a handler when retrying cannot help (e.g. an unreadable payload): the job skips its
 * remaining retries and goes straight to its queue's dead-letter queue (a per-job worker marks it
 * `deadletter`; a claim loop cancels it and sends its payload on, see {@link JobQueue.consume}).
 */
export class PermanentJobError extends Error {
  readonly deadLetter = true;
}

/** How a queue is declared: retry policy, dead-letter queue, expiry and heartbeat. */
export interface QueueDeclaration {
  retry: RetryPolicy;
  deadLetter?: string | undefined;
  /** A job still active after this long is failed by pg-boss's supervisor (retried or dead-lettered). */
  expireInSeconds: number;
  /**
   * When set, a job whose worker stopped refreshing it for this long (a killed process) is failed
   * by the supervisor at its next pass (pg-boss heartbeats, >= 10), instead of after its expiry.
   */
  heartbeatSeconds?: number | undefined;
}

/** Connections pg-boss may open (its fetches, settles, heartbeats and maintenance). */
const QUEUE_POOL_SIZE = 4;
/**
 * How long (ms) a pg-boss query waits for a busy connection before another is opened (frugalExecutor):
 * an idle process's polls then share one connection, i.e. one PostgreSQL backend (issue #9, idle memory).
 */
const QUEUE_POOL_GROW_AFTER_MS = 100;

/** A job that could not be inserted because its id is taken (see {@link JobQueue.enqueueMany}). */
export class JobNotInsertedError extends Error {}

/** A job as a handler sees it: payload plus the attempt counters that decide "last attempt". */
export type QueuedJob<T> = Pick<JobWithMetadata<T>, 'id' | 'data' | 'retryCount' | 'retryLimit'>;

/**
 * The durable job queue: pg-boss on the system-of-record database (ARCHITECTURE.md "Runtime shape"),
 * with its own connections. Jobs are enqueued inside the caller's transaction so a row and its job
 * commit together or not at all.
 */
export class JobQueue {
  readonly boss: PgBoss;
  readonly #database: DatabaseHandle;
  /** pg-boss's own connections (not the application's pool: its polls must not wait behind requests). */
  readonly #pool: pg.Pool;
  readonly #loops: { stop(timeoutMs: number): Promise<void> }[] = [];
  /** This process's claim loops by queue, nudged when this process enqueues (ClaimLoop.nudge). */
  readonly #loopsByName = new Map<string, { nudge(): void }>();
  #started = false;

  constructor(database: DatabaseHandle) {
    this.#database = database;
    // An idle connection closes after POOL_IDLE_TIMEOUT_MS; pg-boss's queries open a second one
    // only when they have waited for the first (frugalExecutor).
    this.#pool = new pg.Pool({
      connectionString: database.connectionString,
      max: QUEUE_POOL_SIZE,
      idleTimeoutMillis: POOL_IDLE_TIMEOUT_MS,
      connectionTimeoutMillis: 10_000,
      application_name: 'pgboss',
    });
    this.#pool.on('error', (error) => {
      if (this.#started) console.error('[queue]', error.message);
    });
    this.boss = new PgBoss({
      db: frugalExecutor(this.#pool, {
        growAfterMs: QUEUE_POOL_GROW_AFTER_MS,
        shrinkAfterMs: POOL_IDLE_TIMEOUT_MS,
      }),
      schema: 'pgboss',
    });
    // pg-boss reports maintenance and polling failures as events; without a listener they throw.
    this.boss.on('error', (error) => {
      if (this.#started) console.error('[queue]', error.message);
    });
  }

  /** Creates pg-boss's schema if needed and starts its maintenance (not workers). */
  async start(): Promise<void> {
    await this.boss.start();
    this.#started = true;
  }

  /** Creates (or updates) a queue with its retry policy, expiry and heartbeat; idempotent. */
  async declareQueue(name: string, declaration: QueueDeclaration): Promise<void> {
    const { retry, deadLetter } = declaration;
    const options = {
      ...(deadLetter ? { deadLetter } : {}),
      retryLimit: retry.retryLimit,
      retryDelay: retry.retryDelaySeconds,
      retryBackoff: retry.retryBackoff,
      expireInSeconds: declaration.expireInSeconds,
      heartbeatSeconds: declaration.heartbeatSeconds ?? null,
    };
    const existing = await this.boss.getQueue(name);
    if (existing) await this.boss.updateQueue(name, options);
    else {
      const { heartbeatSeconds, ...rest } = options;
      await this.boss.createQueue(name, { ...rest, ...(heartbeatSeconds ? { heartbeatSeconds } : {}) });
    }
  }

  /**
   * Inserts a job inside `tx` (it becomes visible only if `tx` commits), in the concurrency group
   * its definition names (definitions.ts `group`, e.g. the team of an email).
   * @param data the payload of `name`'s definition (definitions.ts), checked at compile time.
   * @param id the job's UUID (see ids.newJobId); it doubles as the dedupe key.
   */
  async enqueue<N extends JobName>(tx: Executor, name: N, data: JobPayload<N>, id: string): Promise<void> {
    const group = groupOf(name, data);
    await this.boss.send(name, data, {
      id,
      db: fromDrizzle(tx as never, sql as never),
      ...(group ? { group: { id: group } } : {}),
    });
    this.#loopsByName.get(name)?.nudge();
  }

  /**
   * Runs `handler` on batches of `name`'s jobs with a {@link ClaimLoop}: up to `maxInFlight` jobs
   * held, each settled as soon as its own promise settles, at most `groupConcurrency` jobs of one
   * group in flight. A job rejected with a {@link PermanentJobError} is cancelled and its payload
   * sent to `deadLetter` in one transaction (pg-boss offers terminal failure only inside work()).
   */
  async consume<T extends object>(
    name: string,
    options: Omit<ClaimLoopOptions, 'deadLetter' | 'onError' | 'settler'> & {
      deadLetter?: string | undefined;
    },
    handler: BatchHandler<T>,
  ): Promise<void> {
    const { deadLetter, ...loopOptions } = options;
    const loop = new ClaimLoop<T>(
      this.boss,
      name,
      {
        ...loopOptions,
        deadLetter: (job, message) => this.#deadLetter(name, job, message, deadLetter),
        settler: this.#settler(name),
        onError: (error) => {
          if (this.#started)
            console.error(`[queue] ${name}:`, error instanceof Error ? error.message : error);
        },
      },
      handler,
    );
    this.#loops.push(loop);
    this.#loopsByName.set(name, loop);
    loop.start();
  }

  /** Settles `name`'s claimed jobs in a caller's transaction (one statement per call). */
  #settler(name: string): JobSettler {
    const attempts = (jobs: readonly ClaimedJob<unknown>[]) =>
      jobs.map((job) => ({ id: job.id, retryCount: job.retryCount }));
    const db = (tx: Executor) => ({ db: fromDrizzle(tx as never, sql as never) });
    return {
      complete: async (tx, jobs) => {
        if (jobs.length > 0) await this.boss.complete(name, attempts(jobs), undefined, db(tx));
      },
      fail: async (tx, jobs, message) => {
        if (jobs.length > 0) await this.boss.fail(name, attempts(jobs), { message }, db(tx));
      },
    };
  }

  async #deadLetter(
    name: string,
    job: ClaimedJob<unknown>,
    message: string,
    deadLetter?: string,
  ): Promise<void> {
    console.error(`[queue] ${name} job ${job.id} dead-lettered: ${message}`);
    await this.#database.db.transaction(async (tx) => {
      const db = fromDrizzle(tx as never, sql as never);
      await this.boss.cancel(name, { id: job.id, retryCount: job.retryCount }, { db });
      if (deadLetter) await this.boss.send(deadLetter, job.data as object, { db });
    });
  }

  /**
   * Inserts jobs of queue `name` inside `tx` with ONE statement (pg-boss `insert`; the queue's
   * retry policy and dead-letter queue apply as with `send`). They become visible only if `tx`
   * commits.
   * @param jobs each job's UUID (see ids.newJobId), payload (`name`'s definition) and, optionally, how long pg-boss
   *   keeps it once completed (`deleteAfterSeconds`; the queue's setting otherwise) and the
   *   earliest time it may run (`startAfter`, ISO 8601; at once otherwise).
   * @throws JobNotInsertedError when a job was not inserted: pg-boss's insert skips an id that
   *   already exists (ON CONFLICT DO NOTHING), which would leave a row without its job.
   * This process's claim loop of `name`, if any, is nudged (ClaimLoop.nudge: it polls at its busy
   * interval for a while, so the jobs are picked up soon after `tx` commits).
   */
  async enqueueMany<N extends JobName>(
    tx: Executor,
    name: N,
    jobs: {
      id: string;
      data: JobPayload<N>;
      deleteAfterSeconds?: number;
      /** Not before this time (a scheduled send); with `retentionSeconds` long enough to wait for it. */
      startAfter?: Date | string;
      retentionSeconds?: number;
    }[],
  ): Promise<void> {
    if (jobs.length === 0) return;
    const db = fromDrizzle(tx as never, sql as never);
    // The same concurrency group as enqueue() gives (e.g. the team of an email.send job).
    const grouped = jobs.map((job) => {
      const group = groupOf(name, job.data);
      return group ? { ...job, group: { id: group } } : job;
    });
    const ids = (await this.boss.insert(name, grouped, { db, returnId: true })) ?? [];
    if (ids.length !== jobs.length) {
      const inserted = new Set(ids);
      const missing = jobs.filter((job) => !inserted.has(job.id)).map((job) => job.id);
      throw new JobNotInsertedError(`${name}: job id(s) already exist: ${missing.join(', ')}`);
    }
    this.#loopsByName.get(name)?.nudge();
  }

  /**
   * Runs `handler` for jobs of `name`, fetching up to `batchSize` per poll and processing them
   * concurrently; each job is settled on its own (pg-boss `perJobResults`). A handler that throws
   * hands its job back to pg-boss for the queue's retry policy; a terminal outcome is the
   * handler's to record before it returns.
   */
  async work<T extends object>(
    name: string,
    options: { batchSize: number; pollingIntervalSeconds: number },
    handler: (job: QueuedJob<T>) => Promise<void>,
  ): Promise<void> {
    await this.boss.work<T>(
      name,
      {
        batchSize: options.batchSize,
        pollingIntervalSeconds: options.pollingIntervalSeconds,
        // Fetch again at once after a full batch: without it a worker idles pollingIntervalSeconds
        // after every batch while a backlog waits (ARCHITECTURE.md, "queue").
        burstWhenBatchFull: true,
        includeMetadata: true,
        perJobResults: true,
      },
      async (jobs) => {
        const results = await Promise.allSettled(jobs.map((job) => handler(job as unknown as QueuedJob<T>)));
        return results.map((result, index) => {
          const id = jobs[index]!.id;
          if (result.status === 'fulfilled') return { id, status: 'completed' as const };
          const reason: unknown = result.reason;
          return {
            id,
            status: reason instanceof PermanentJobError ? ('deadletter' as const) : ('failed' as const),
            output: { message: reason instanceof Error ? reason.message : String(reason) },
          };
        });
      },
    );
  }

  /** Stops workers (waiting for running handlers up to `timeoutMs`) and maintenance, then closes pg-boss's pool. */
  async stop(timeoutMs = 10_000): Promise<void> {
    if (this.#started) {
      await Promise.all(this.#loops.map((loop) => loop.stop(timeoutMs)));
      this.#started = false;
      await this.boss.stop({ graceful: true, timeout: timeoutMs, close: true });
    }
    if (!this.#pool.ending) await this.#pool.end();
  }
}
