import { sql } from 'drizzle-orm';
import { fromDrizzle, fromPglite, type JobWithMetadata, PgBoss } from 'pg-boss';
import type { DatabaseHandle, Executor } from '../db/client.ts';

/** Retry policy of a queue: attempts after the first, delay in seconds, exponential backoff. */
export interface RetryPolicy {
  retryLimit: number;
  retryDelaySeconds: number;
  retryBackoff: boolean;
}

/**
 * Thrown by a handler when retrying cannot help (e.g. an unreadable payload): the job skips its
 * remaining retries and goes straight to its queue's dead-letter queue.
 */
export class PermanentJobError extends Error {}

/** A job that could not be inserted because its id is taken (see {@link JobQueue.enqueueMany}). */
export class JobNotInsertedError extends Error {}

/** A job as a handler sees it: payload plus the attempt counters that decide "last attempt". */
export type QueuedJob<T> = Pick<JobWithMetadata<T>, 'id' | 'data' | 'retryCount' | 'retryLimit'>;

/**
 * The durable job queue: pg-boss on the system-of-record database (ARCHITECTURE.md "Runtime shape"),
 * through its PGlite adapter on the embedded default. Jobs are enqueued inside the caller's
 * transaction so a row and its job commit together or not at all.
 */
export class JobQueue {
  readonly boss: PgBoss;
  #started = false;

  constructor(database: DatabaseHandle) {
    this.boss =
      database.kind === 'pglite'
        ? new PgBoss({ db: fromPglite(database.pglite), schema: 'pgboss' })
        : new PgBoss({ connectionString: database.connectionString, schema: 'pgboss', max: 4 });
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

  /** Creates (or updates) a queue with its retry policy; idempotent. */
  async declareQueue(name: string, retry: RetryPolicy, deadLetter?: string): Promise<void> {
    const options = {
      ...(deadLetter ? { deadLetter } : {}),
      retryLimit: retry.retryLimit,
      retryDelay: retry.retryDelaySeconds,
      retryBackoff: retry.retryBackoff,
      expireInSeconds: 300,
    };
    const existing = await this.boss.getQueue(name);
    if (existing) await this.boss.updateQueue(name, options);
    else await this.boss.createQueue(name, options);
    // Load the queue into pg-boss's queue cache now: on a cache miss `send` looks the queue up on
    // its own connection, which on PGlite (one connection) would wait forever for the caller's
    // open transaction.
    await this.boss.findJobs(name, { id: '00000000-0000-0000-0000-000000000000' });
  }

  /**
   * Inserts a job inside `tx` (it becomes visible only if `tx` commits).
   * @param id the job's UUID (see ids.newJobId); it doubles as the dedupe key.
   */
  async enqueue(tx: Executor, name: string, data: object, id: string): Promise<void> {
    await this.boss.send(name, data, { id, db: fromDrizzle(tx as never, sql as never) });
  }

  /**
   * Inserts jobs of queue `name` inside `tx` with ONE statement (pg-boss `insert`; the queue's
   * retry policy and dead-letter queue apply as with `send`). They become visible only if `tx`
   * commits.
   * @param jobs each job's UUID (see ids.newJobId), payload and, optionally, how long pg-boss
   *   keeps it once completed (`deleteAfterSeconds`; the queue's setting otherwise).
   * @throws JobNotInsertedError when a job was not inserted: pg-boss's insert skips an id that
   *   already exists (ON CONFLICT DO NOTHING), which would leave a row without its job.
   */
  async enqueueMany(
    tx: Executor,
    name: string,
    jobs: { id: string; data: object; deleteAfterSeconds?: number }[],
  ): Promise<void> {
    if (jobs.length === 0) return;
    const db = fromDrizzle(tx as never, sql as never);
    const ids = (await this.boss.insert(name, jobs, { db, returnId: true })) ?? [];
    if (ids.length !== jobs.length) {
      const inserted = new Set(ids);
      const missing = jobs.filter((job) => !inserted.has(job.id)).map((job) => job.id);
      throw new JobNotInsertedError(`${name}: job id(s) already exist: ${missing.join(', ')}`);
    }
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

  /** Stops workers (waiting for running handlers up to `timeoutMs`) and maintenance. */
  async stop(timeoutMs = 10_000): Promise<void> {
    if (!this.#started) return;
    this.#started = false;
    await this.boss.stop({ graceful: true, timeout: timeoutMs, close: true });
  }
}
