import { type SQL, sql } from 'drizzle-orm';
import pg from 'pg';
import { fromDrizzle, type JobWithMetadata, PgBoss } from 'pg-boss';
import { type DatabaseHandle, type Executor, POOL_IDLE_TIMEOUT_MS } from '../db/client.ts';
import { messageForLog } from '../db/errors.ts';
import { closeIdleConnections, frugalExecutor } from '../db/frugal-pool.ts';
import { ALWAYS, type StatementPart } from '../db/named-statement.ts';
import { StatisticsChecks, statisticsAreStale } from '../db/stale-statistics.ts';
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

/** A claimed batch of at least this many jobs makes {@link JobQueue.consume} check the statistics. */
export const BACKLOG_BATCH = 10;
/**
 * The job table's columns whose statistics the queue's statements are planned from (pg-boss's
 * fetch and completion: their filters, sort keys and per-group counts):
 * JobQueue.refreshStatistics analyzes only these. The payload columns (`data`, `output`) are most of
 * a whole-table ANALYZE and no plan of the queue filters on them (measured on this machine, 10,000
 * jobs with JSON payloads: 152-159 ms for the table, 26-34 ms for these columns).
 * Autovacuum still analyzes the whole table later: a column list does not reset the table's count
 * of changes since its last analyze (PostgreSQL "ANALYZE", pgstat_report_analyze).
 */
export const PLANNED_JOB_COLUMNS = [
  'id',
  'name',
  'state',
  'priority',
  'created_on',
  'start_after',
  'group_id',
  'singleton_key',
  'policy',
  'blocked',
] as const;

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
  /** The queues with a pg-boss worker ({@link work}): {@link stop} takes them off at its start. */
  readonly #workedQueues = new Set<string>();
  #started = false;
  /** When refreshStatistics last checked each queue. */
  readonly #statisticsChecks = new StatisticsChecks();
  /** The pg-boss job table of each consumed queue (see completionSql). */
  readonly #tables = new Map<string, string>();
  /** completionSql's statement parts, built once per queue and condition (by their keys). */
  readonly #completions = new Map<string, SQL>();

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

  /**
   * Closes pg-boss's idle connections (see closeIdleConnections): called once start-up's queries are
   * done, so the polls that follow run on a fresh PostgreSQL backend without start-up's caches
   * (issue #9, idle memory). Returns how many it closed.
   */
  closeIdleConnections(): Promise<number> {
    return closeIdleConnections(this.#pool);
  }

  /**
   * Creates (or updates) a queue with its retry policy, expiry and heartbeat; idempotent. An
   * existing queue gets the declaration's settings too, a retry-delay cap included (or loses one no
   * longer declared): pg-boss copies the queue's settings into each job it inserts afterwards, so
   * an installation whose queues predate a setting has it for every job enqueued after its next start.
   */
  async declareQueue(name: string, declaration: QueueDeclaration): Promise<void> {
    const { retry, deadLetter } = declaration;
    const options = {
      ...(deadLetter ? { deadLetter } : {}),
      retryLimit: retry.retryLimit,
      retryDelay: retry.retryDelaySeconds,
      retryBackoff: retry.retryBackoff,
      retryDelayMax: retry.retryDelayMaxSeconds ?? null,
      expireInSeconds: declaration.expireInSeconds,
      heartbeatSeconds: declaration.heartbeatSeconds ?? null,
    };
    const existing = await this.boss.getQueue(name);
    if (existing) await this.boss.updateQueue(name, options);
    else {
      const { heartbeatSeconds, retryDelayMax, ...rest } = options;
      await this.boss.createQueue(name, {
        ...rest,
        ...(heartbeatSeconds ? { heartbeatSeconds } : {}),
        ...(retryDelayMax !== null ? { retryDelayMax } : {}),
      });
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
  }

  /**
   * Runs `handler` on batches of `name`'s jobs with a {@link ClaimLoop}: up to `maxInFlight` jobs
   * held, each settled as soon as its own promise settles, at most `groupConcurrency` jobs of one
   * group in flight. A job rejected with a {@link PermanentJobError} is cancelled and its payload
   * sent to `deadLetter` in one transaction (pg-boss offers terminal failure only inside work()).
   * A batch of {@link BACKLOG_BATCH} or more jobs triggers {@link refreshStatistics} for the queue.
   */
  async consume<T extends object>(
    name: string,
    options: Omit<ClaimLoopOptions, 'deadLetter' | 'onError' | 'settler'> & {
      deadLetter?: string | undefined;
    },
    handler: BatchHandler<T>,
  ): Promise<void> {
    const { deadLetter, ...loopOptions } = options;
    const table = await this.#tableOf(name);
    if (table) this.#tables.set(name, table);
    // A batch this big means a backlog: make sure the planner knows of it (refreshStatistics: at
    // most one check a minute, off the jobs' path). Without it, every fetch and complete of a burst
    // newer than the table's statistics reads the whole backlog (issue #9: 14 ms and ~1,000 buffers
    // per fetch of 20 emails with 9,000 waiting; the PostgreSQL half of the worker's CPU).
    const handle: BatchHandler<T> = (jobs) => {
      if (jobs.length >= BACKLOG_BATCH) void this.refreshStatistics(name);
      return handler(jobs);
    };
    const loop = new ClaimLoop<T>(
      this.boss,
      name,
      {
        ...loopOptions,
        deadLetter: (job, message) => this.#deadLetter(name, job, message, deadLetter),
        settler: this.#settler(name),
        onError: (error) => {
          if (this.#started) console.error(`[queue] ${name}:`, messageForLog(error));
        },
      },
      handle,
    );
    this.#loops.push(loop);
    loop.start();
  }

  /**
   * The statement that completes `jobs` (claimed from queue `name` by this process's claim loop) as
   * an `update … returning id` to run as a data-modifying CTE of the caller's own statement, so a
   * handler can record its outcome and complete its jobs in ONE statement, without a transaction
   * around two (issue #11: each round trip counts while a job holds its slot). It is the update
   * pg-boss 12's complete() makes (state `completed`, `completed_on`, no output; only active jobs,
   * fenced to the claimed attempt like the settler's); pg-boss does no other work on complete.
   * `onlyIf` (a condition, default always) gates the completion: the caller's statement can make
   * every part of itself conditional on one same condition. A statement part built once per queue
   * and condition (StatementPart): the jobs are the values `jobIds` and `jobAttempts`, beside the
   * condition's own.
   * Undefined when the queue's table is not known (not consumed here): use the settler then.
   */
  completionSql(
    name: string,
    jobs: readonly ClaimedJob<unknown>[],
    onlyIf: StatementPart = ALWAYS,
  ): StatementPart | undefined {
    const table = this.#tables.get(name);
    if (!table) return undefined;
    const key = `complete\0${table}\0${name}\0${onlyIf.key}`;
    let part = this.#completions.get(key);
    if (!part) {
      part = sql`update ${sql.raw(`pgboss.${table}`)} set completed_on = pgboss.job_now(),
          state = 'completed', output = null
        where name = ${name} and id = any(${sql.placeholder('jobIds')}::uuid[]) and state = 'active'
          and (id::text || ':' || retry_count::text) = any(${sql.placeholder('jobAttempts')}::text[])
          and (${onlyIf.sql})
        returning id`;
      this.#completions.set(key, part);
    }
    return {
      key,
      sql: part,
      values: {
        ...onlyIf.values,
        // Array literals (uuids and `uuid:n` have no comma, quote or brace).
        jobIds: `{${jobs.map((job) => job.id).join(',')}}`,
        jobAttempts: `{${jobs.map((job) => `${job.id.toLowerCase()}:${job.retryCount}`).join(',')}}`,
      },
    };
  }

  /** The pg-boss job table of queue `name` (a partitioned queue has its own), or undefined. */
  async #tableOf(name: string): Promise<string | undefined> {
    const { rows } = await this.#database.pool.query<{ table_name: string }>(
      'select table_name from pgboss.queue where name = $1',
      [name],
    );
    const table = rows[0]?.table_name;
    return table && /^[a-z0-9_]+$/.test(table) ? table : undefined;
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
      giveBack: async (tx, jobs, message) => {
        if (jobs.length === 0) return;
        // The failure below counts an attempt (retry_count + 1): the limit moves with it.
        const table = this.#tables.get(name) ?? (await this.#tableOf(name));
        if (table) {
          const ids = `{${jobs.map((job) => job.id).join(',')}}`;
          await tx.execute(sql`update ${sql.raw(`pgboss.${table}`)}
            set retry_limit = retry_limit + 1
            where name = ${name} and id = any(${ids}::uuid[]) and state = 'active'`);
        }
        await this.boss.fail(name, attempts(jobs), { message }, db(tx));
      },
      completionSql: (jobs, onlyIf) => this.completionSql(name, jobs, onlyIf),
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
   * Cancels job `id` (its UUID) of queue `name` inside `tx` if it has not started: a waiting job
   * (pg-boss state `created`, scheduled or not, or `retry`) becomes `cancelled` and never runs. The
   * update locks the row until `tx` ends, and a worker claims jobs with `for update skip locked`,
   * so a job is either cancelled here or claimed by a worker, never both (a claim in progress is
   * waited for, then seen).
   * @returns 'cancelled'; otherwise the job's state as it stands (e.g. 'active': a worker holds it),
   *   or undefined when there is no such job (deleted after its retention).
   */
  async cancelIfWaiting(tx: Executor, name: JobName, id: string): Promise<string | undefined> {
    const cancelled = (await tx.execute(
      sql`update pgboss.job set state = 'cancelled', completed_on = now()
        where name = ${name} and id = ${id}::uuid and state < 'active' returning id`,
    )) as unknown as { rows: unknown[] };
    if (cancelled.rows.length > 0) return 'cancelled';
    const found = (await tx.execute(
      sql`select state::text as state from pgboss.job where name = ${name} and id = ${id}::uuid`,
    )) as unknown as { rows: { state: string }[] };
    return found.rows[0]?.state;
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
  }

  /**
   * Refreshes PostgreSQL's statistics of queue `name`'s job table (ANALYZE) when the planner
   * underestimates its waiting jobs tenfold or more and there are at least
   * STALE_BACKLOG_MIN_ROWS (db/stale-statistics.ts) of them; checks at most once per
   * STATISTICS_CHECK_INTERVAL_MS (db/stale-statistics.ts) per queue and process (two cheap queries), so callers may
   * call it on every busy batch. Why: pg-boss's fetch and complete statements are planned from the
   * table's statistics; with none, or ones taken before a burst (a fresh database, the first
   * backlog of a queue), the planner expects a handful of waiting jobs, and every fetch then reads
   * and sorts the whole backlog, every complete scans it too (measured: 7.8 ms instead of 1.3 ms
   * per fetch with 5,000 waiting), until autovacuum analyzes the table a minute or more later.
   * @returns whether it analyzed. Never throws (a failure is logged: it only costs speed).
   */
  async refreshStatistics(name: string): Promise<boolean> {
    if (!this.#statisticsChecks.due(name)) return false;
    try {
      const { pool } = this.#database;
      const tableName = this.#tables.get(name) ?? (await this.#tableOf(name));
      if (!tableName) return false;
      const waiting = `from pgboss.${tableName} where name = $1 and state < 'active'`;
      const [counted, explained] = await Promise.all([
        pool.query<{ n: number }>(`select count(*)::int as n ${waiting}`, [name]),
        pool.query<{ 'QUERY PLAN': [{ Plan: { 'Plan Rows': number } }] }>(
          `explain (format json) select 1 ${waiting}`,
          [name],
        ),
      ]);
      const actual = counted.rows[0]?.n ?? 0;
      const estimated = explained.rows[0]?.['QUERY PLAN'][0].Plan['Plan Rows'] ?? 0;
      if (!statisticsAreStale(actual, estimated)) return false;
      await pool.query(`analyze pgboss.${tableName} (${PLANNED_JOB_COLUMNS.join(', ')})`);
      return true;
    } catch (error) {
      if (this.#started)
        console.error(`[queue] ${name}: statistics refresh failed:`, (error as Error).message);
      return false;
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
    this.#workedQueues.add(name);
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

  /**
   * Stops `loop` (a worker loop of its own tables, e.g. the webhook dispatcher) with this queue's
   * claim loops, before pg-boss: {@link stop} waits for both the same way.
   */
  attach(loop: { stop(timeoutMs: number): Promise<void> }): void {
    this.#loops.push(loop);
  }

  /**
   * Stops the claim loops, the attached loops and pg-boss's workers together, waiting for their
   * running handlers up to `timeoutMs` in all (ms), then maintenance, then closes pg-boss's pool.
   * pg-boss's workers stop fetching at once: stopped only after the loops, they went on taking new
   * jobs (an invitation's send, a thumbnail) while the loops drained, and then had `timeoutMs` of
   * their own, so a stop could last twice the wait the README tells service managers to allow
   * (review finding, session 19). A handler still running at the deadline has its job failed by
   * pg-boss (retried per its queue's policy).
   */
  async stop(timeoutMs = 10_000): Promise<void> {
    if (this.#started) {
      const deadline = Date.now() + timeoutMs;
      for (const name of this.#workedQueues) await this.boss.offWork(name, { wait: false });
      await Promise.all(this.#loops.map((loop) => loop.stop(timeoutMs)));
      this.#started = false;
      await this.boss.stop({ graceful: true, timeout: Math.max(0, deadline - Date.now()), close: true });
    }
    if (!this.#pool.ending) await this.#pool.end();
  }
}
