import { drizzle } from 'drizzle-orm/node-postgres';
import type { Config } from '../../config.ts';
import type { Database, DatabaseHandle } from '../../db/client.ts';
import { messageForLog } from '../../db/errors.ts';
import * as schema from '../../db/schema/index.ts';
import { type MaintenanceReport, type RetentionCursor, runMaintenance } from './maintenance.service.ts';

/**
 * The PostgreSQL advisory lock (a bigint key) a run holds: one run at a time across every worker
 * process; a process that does not get it skips that run. 724001 is the migrations' (db/client.ts).
 */
export const MAINTENANCE_LOCK_KEY = 724_002;
/** First run this long after start (ms): start-up's own work is done by then. */
export const MAINTENANCE_FIRST_RUN_MS = 60_000;
/** Then a run every 10 minutes (ms), counted from the end of the previous one. */
export const MAINTENANCE_INTERVAL_MS = 10 * 60_000;
/** A run starts no new statement after this long (ms); what is left waits for the next run. */
export const MAINTENANCE_RUN_BUDGET_MS = 5_000;

/** Where the loop reports (pino's logger fits: the context's). */
export interface MaintenanceLogger {
  info(details: object, message: string): void;
  error(details: object, message: string): void;
}

/** What the loop runs over. The timings default to the constants above; tests shorten them. */
export interface MaintenanceLoopDeps {
  /** Its pool lends the connection a run holds its lock on and runs its statements over. */
  database: Pick<DatabaseHandle, 'pool'>;
  config: Pick<Config, 'LOG_RETENTION_DAYS'>;
  logger: MaintenanceLogger;
  firstRunAfterMs?: number;
  intervalMs?: number;
  budgetMs?: number;
  /** Rows per delete statement (maintenance.service.ts MAINTENANCE_BATCH_ROWS by default). */
  batchRows?: number;
}

/**
 * The workers' maintenance loop (review finding "growth"): {@link runMaintenance} once
 * {@link MAINTENANCE_FIRST_RUN_MS} after start, then every {@link MAINTENANCE_INTERVAL_MS}, each
 * run under {@link MAINTENANCE_LOCK_KEY} and within {@link MAINTENANCE_RUN_BUDGET_MS}. Its timer
 * does not keep the process alive; the queue stops it with its other loops (JobQueue.attach).
 */
export class MaintenanceLoop {
  readonly #deps: MaintenanceLoopDeps;
  readonly #cursor: RetentionCursor = { team: '', webhook: '', version: '' };
  readonly #running = new Set<Promise<unknown>>();
  #timer: NodeJS.Timeout | undefined;
  #stopping = false;

  constructor(deps: MaintenanceLoopDeps) {
    this.#deps = deps;
  }

  /** Schedules the first run. */
  start(): void {
    this.#schedule(this.#deps.firstRunAfterMs ?? MAINTENANCE_FIRST_RUN_MS);
  }

  /**
   * One run now, if this process gets the lock: on a connection of its own, which holds the
   * session-level advisory lock for the run and runs its statements (each commits on its own).
   * @returns the rows it deleted, or undefined when another process (or run) holds the lock or a
   *   stop has begun. Throws what the database throws (the connection or a statement failed).
   */
  async runOnce(): Promise<MaintenanceReport | undefined> {
    if (this.#stopping) return undefined;
    const run = this.#runLocked();
    this.#running.add(run);
    try {
      return await run;
    } finally {
      this.#running.delete(run);
    }
  }

  /**
   * Stops scheduling and waits for a run in progress, up to `timeoutMs` (ms): it starts no new
   * statement once the stop began, so it ends with its current one (at most MAINTENANCE_BATCH_ROWS
   * rows). A statement still running after `timeoutMs` is cut when the pool closes.
   */
  async stop(timeoutMs: number): Promise<void> {
    this.#stopping = true;
    clearTimeout(this.#timer);
    if (this.#running.size === 0) return;
    let timer: NodeJS.Timeout | undefined;
    await Promise.race([
      Promise.allSettled([...this.#running]),
      new Promise<void>((resolve) => {
        timer = setTimeout(resolve, timeoutMs);
      }),
    ]);
    clearTimeout(timer);
  }

  #schedule(delayMs: number): void {
    if (this.#stopping) return;
    this.#timer = setTimeout(() => void this.#tick(), delayMs);
    this.#timer.unref();
  }

  async #tick(): Promise<void> {
    try {
      const report = await this.runOnce();
      if (!report) return;
      const { finished, ...deleted } = report;
      if (Object.values(deleted).some((rows) => rows > 0))
        this.#deps.logger.info({ deleted, finished }, 'Maintenance deleted expired rows');
    } catch (error) {
      this.#deps.logger.error({ error: messageForLog(error) }, 'Maintenance run failed');
    } finally {
      this.#schedule(this.#deps.intervalMs ?? MAINTENANCE_INTERVAL_MS);
    }
  }

  async #runLocked(): Promise<MaintenanceReport | undefined> {
    const client = await this.#deps.database.pool.connect();
    let locked = false;
    let broken = false;
    try {
      const result = await client.query<{ locked: boolean }>('select pg_try_advisory_lock($1) as locked', [
        MAINTENANCE_LOCK_KEY,
      ]);
      locked = result.rows[0]?.locked === true;
      if (!locked) return undefined;
      const db = drizzle({ client, schema }) as unknown as Database;
      const deadline = performance.now() + (this.#deps.budgetMs ?? MAINTENANCE_RUN_BUDGET_MS);
      return await runMaintenance(db, {
        retentionDays: this.#deps.config.LOG_RETENTION_DAYS,
        canContinue: () => !this.#stopping && performance.now() < deadline,
        cursor: this.#cursor,
        ...(this.#deps.batchRows ? { batchRows: this.#deps.batchRows } : {}),
      });
    } finally {
      if (locked) {
        await client.query('select pg_advisory_unlock($1)', [MAINTENANCE_LOCK_KEY]).catch(() => {
          broken = true;
        });
      }
      // A connection that could not give the lock back is closed, which releases it.
      client.release(broken);
    }
  }
}

/** Starts a {@link MaintenanceLoop} (a worker loop, see jobs/registry.ts JobHandlers.loops). */
export function startMaintenanceLoop(deps: MaintenanceLoopDeps): MaintenanceLoop {
  const loop = new MaintenanceLoop(deps);
  loop.start();
  return loop;
}
