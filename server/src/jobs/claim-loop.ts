import type { JobWithMetadata, PgBoss } from 'pg-boss';
import type { Executor } from '../db/client.ts';
import type { StatementPart } from '../db/named-statement.ts';
import { reservedSlots } from '../reserved-slots.ts';

/**
 * Settles claimed jobs inside the caller's transaction `tx` (pg-boss `complete`/`fail` with its
 * `db` option), so a handler can commit its own outcome rows and its jobs' completion together —
 * one commit instead of two, and the job leaves `active` (freeing its team's slot) with it. Each
 * call is one statement for all `jobs`, fenced to their claimed attempt (a job claimed again
 * elsewhere since is left alone). A handler that used it resolves its job's promise with
 * {@link SETTLED} once `tx` committed.
 */
export interface JobSettler {
  /** Completes `jobs` in `tx`. */
  complete(tx: Executor, jobs: readonly ClaimedJob<unknown>[]): Promise<void>;
  /** Fails `jobs` in `tx` with `message`: the queue retries them per its policy, or dead-letters them. */
  fail(tx: Executor, jobs: readonly ClaimedJob<unknown>[], message: string): Promise<void>;
  /**
   * Gives `jobs` back in `tx` unattempted (a stopping worker never started them): retried later
   * like a failure, with `message`, but the attempt is not counted, so a job on its last attempt
   * is not dead-lettered for it.
   */
  giveBack(tx: Executor, jobs: readonly ClaimedJob<unknown>[], message: string): Promise<void>;
  /**
   * The completion of `jobs` as an `update … returning id` to run as a data-modifying CTE of the
   * caller's own statement (see JobQueue.completionSql), completing them only where `onlyIf` (a
   * condition; default always) holds, both statement parts built once (StatementPart); undefined
   * when this queue cannot give one (use `complete`).
   */
  completionSql(jobs: readonly ClaimedJob<unknown>[], onlyIf?: StatementPart): StatementPart | undefined;
}

/** A claimed job as a batch handler sees it; `signal` aborts when the worker gives the job up. */
export interface ClaimedJob<T> {
  id: string;
  data: T;
  /** Attempts before this one (0 on the first). */
  retryCount: number;
  /** Attempts allowed after the first: `retryCount >= retryLimit` means this is the last. */
  retryLimit: number;
  /** Aborted when the worker stops and waited long enough, or the job's claim was lost. */
  signal: AbortSignal;
  /**
   * Aborted when the worker starts stopping (before `signal`): a handler starts no work it could
   * not finish within the stop's wait from then on — the send job gives up an email still waiting
   * for a connection slot (retried later, nothing sent) and lets sends in progress finish.
   */
  stopping: AbortSignal;
  /** Settles this job inside a handler's own transaction (see {@link JobSettler}). */
  settler: JobSettler;
}

/**
 * What a job's promise resolves with when its handler settled the job itself, in its own committed
 * transaction ({@link JobSettler}): the loop then only frees the job's slot.
 */
export const SETTLED = Symbol('settled by the handler');

/**
 * Handles a batch of claimed jobs: returns one promise per job, in order, each settling when THAT
 * job is done — resolved = completed; resolved with {@link SETTLED} = the handler already completed
 * or failed the job in its own transaction; rejected = failed (the queue retries it per its
 * policy, then dead-letters it); rejected with an error whose `deadLetter` is true = dead-lettered
 * at once.
 */
export type BatchHandler<T> = (jobs: ClaimedJob<T>[]) => Promise<undefined | typeof SETTLED>[];

/** Options of a {@link ClaimLoop}. */
export interface ClaimLoopOptions {
  /** Jobs held at once (claimed and not yet settled). */
  maxInFlight: number;
  /** Jobs claimed per fetch at most. */
  batchSize: number;
  /**
   * Jobs of one group (pg-boss `group.id`) active at once across all workers; unset = no cap. When
   * set, the last tenth of THIS loop's slots goes only to groups holding none here ({@link reservedSlots}).
   */
  groupConcurrency?: number;
  /** Wait before fetching again after a fetch found less than it asked for (ms). */
  pollingIntervalMs: number;
  /** How often held jobs' heartbeats are refreshed (ms); unset when the queue has no heartbeat. */
  heartbeatRefreshMs?: number;
  /** Gives up a job the handler could not be made to settle; see {@link ClaimLoop.stop}. */
  deadLetter(job: ClaimedJob<unknown>, message: string): Promise<void>;
  /** Handed to the handler with each job (settling in the handler's own transaction). */
  settler: JobSettler;
  onError(error: unknown): void;
}

type Settlement = { status: 'completed' | 'settled' } | { status: 'failed' | 'deadletter'; message: string };

interface Held {
  job: ClaimedJob<unknown>;
  /** The job's pg-boss group (a team's id for `email.send`), if it has one. */
  group: string | undefined;
  abort: AbortController;
  settlement?: Settlement;
}

/**
 * After a short fetch, the latest next fetch once a settle woke the loop (ms); it comes earlier when
 * enough slots were freed (see #run).
 */
const MIN_REFETCH_GAP_MS = 20;
/** How long stop() lets aborted handlers record their own outcome before it fails their jobs (ms). */
const ABORT_GRACE_MS = 2_000;

/**
 * A worker loop over one pg-boss queue built for delivery throughput (issues #8, #9):
 * - keeps up to `maxInFlight` jobs claimed, fetching `batchSize` at a time as soon as slots are
 *   free — no idle wait while a backlog exists (a full fetch is followed at once by the next);
 * - settles each job as soon as ITS promise settles (not when its batch's slowest job does), with
 *   the settles that pile up meanwhile sent together (one `complete` statement per group) — or
 *   lets the handler settle it in the handler's own transaction ({@link JobSettler}, {@link SETTLED});
 * - caps the jobs of one group in flight across all workers (`groupConcurrency`, pg-boss groups),
 *   and keeps the last tenth of this loop's slots for groups holding none ({@link reservedSlots}), so
 *   slow groups never take every slot: other groups' jobs keep being fetched;
 * - refreshes the heartbeat of held jobs, and aborts a job whose claim was lost.
 * pg-boss's own `work()` settles a batch only when all of it is done, hence this loop on its
 * public fetch/complete/fail/touch calls.
 */
export class ClaimLoop<T> {
  readonly #boss: PgBoss;
  readonly #name: string;
  readonly #options: ClaimLoopOptions;
  readonly #handler: BatchHandler<T>;
  readonly #held = new Map<string, Held>();
  /** Jobs held per group (groups holding none are absent). */
  readonly #groups = new Map<string, number>();
  #settled: Held[] = [];
  /** The last {@link #flush} started; it runs while {@link #flushActive}. */
  #flushing: Promise<void> | undefined;
  /** Set when a flush starts, cleared in the same step as its last look at `#settled`. */
  #flushActive = false;
  #stopping = false;
  /** Aborted when {@link stop} begins: each held job's `stopping`. */
  readonly #stop = new AbortController();
  #running: Promise<void> | undefined;
  #wake: (() => void) | undefined;
  /** A wake-up that came while the loop was not napping (e.g. during a fetch): skip the next nap. */
  #wakePending = false;
  #heartbeat: NodeJS.Timeout | undefined;
  /** Slots freed so far (settled jobs whose settle was written). */
  #freed = 0;
  /** Freed slots that make a refetch worth it before MIN_REFETCH_GAP_MS (see #run). */
  readonly #refetchAfter: number;

  constructor(boss: PgBoss, name: string, options: ClaimLoopOptions, handler: BatchHandler<T>) {
    this.#boss = boss;
    this.#name = name;
    this.#options = options;
    this.#handler = handler;
    // A quarter of what one group may hold (the batch a capped group can take), else of the slots.
    const { groupConcurrency, maxInFlight, batchSize } = options;
    this.#refetchAfter = Math.max(1, Math.ceil(Math.min(groupConcurrency ?? maxInFlight, batchSize) / 4));
  }

  /** Starts fetching (returns at once). */
  start(): void {
    this.#running = this.#run();
    const every = this.#options.heartbeatRefreshMs;
    if (every) this.#heartbeat = setInterval(() => void this.#touch(), every);
  }

  /** Jobs claimed and not yet settled. */
  get inFlight(): number {
    return this.#held.size;
  }

  /**
   * Stops fetching and aborts every held job's `stopping` signal, then waits up to `timeoutMs` for
   * held jobs to settle. Jobs still running then
   * are aborted (their handlers may still record an outcome within a short grace), and the rest are
   * failed — the queue retries them, or dead-letters them on their last attempt (ARCHITECTURE.md:
   * an email whose every attempt was interrupted ends `failed` through the dead letter).
   */
  async stop(timeoutMs: number): Promise<void> {
    this.#stopping = true;
    this.#stop.abort(new Error('the worker is stopping'));
    this.#wakeUp();
    await this.#running;
    const deadline = Date.now() + timeoutMs;
    while (this.#held.size > 0 && Date.now() < deadline) await sleep(20);
    if (this.#held.size > 0) {
      for (const held of this.#held.values()) held.abort.abort(new Error('the worker is stopping'));
      const grace = Date.now() + ABORT_GRACE_MS;
      while (this.#unsettled().length > 0 && Date.now() < grace) await sleep(20);
      for (const held of this.#unsettled()) {
        this.#settle(held, { status: 'failed', message: 'Interrupted: the worker stopped during the job' });
      }
    }
    clearInterval(this.#heartbeat);
    while (this.#flushActive) await this.#flushing;
  }

  async #run(): Promise<void> {
    const { maxInFlight, batchSize, pollingIntervalMs } = this.#options;
    const refill = Math.max(1, Math.min(batchSize, Math.ceil(maxInFlight / 4)));
    let lastFetch = 0;
    /**
     * Set after a fetch that found some jobs but fewer than it asked for (see below): the slots
     * freed by then, and the least the next fetch asks for (doubled after each fetch that found
     * all it asked for, until a full batch).
     */
    let limited: { freed: number; floor: number } | undefined;
    while (!this.#stopping) {
      let free = maxInFlight - this.#held.size;
      // Gather a few free slots rather than fetching one job per settle, but never wait long.
      if (free < refill) await this.#nap(free <= 0 ? pollingIntervalMs : 5);
      free = maxInFlight - this.#held.size;
      if (this.#stopping) break;
      if (free <= 0) continue;
      let wanted = Math.min(free, batchSize);
      // The reserve ({@link reservedSlots}): a fetch for any group leaves it free; once only the
      // reserve is free, the next fetch skips every group holding jobs here (#fetch).
      const reserve = this.#options.groupConcurrency ? reservedSlots(maxInFlight) : 0;
      if (free > reserve) wanted = Math.min(wanted, free - reserve);
      if (limited) {
        // A fetch came back short while jobs remained, most often because of a group's cap: each
        // slot freed since lets about one more of that group's jobs in. pg-boss locks as many rows
        // as asked for before it applies the cap (group_ranking), so asking for far more locks rows
        // only to let them go (measured in bench:send: ~100 rows locked per fetch to claim ~12).
        const freedSince = this.#freed - limited.freed;
        wanted = Math.min(wanted, Math.max(limited.floor, 2 * Math.max(freedSince, this.#refetchAfter)));
      }
      let jobs: JobWithMetadata<T>[];
      try {
        lastFetch = Date.now();
        jobs = await this.#fetch(wanted);
      } catch (error) {
        this.#options.onError(error);
        await this.#nap(pollingIntervalMs);
        continue;
      }
      if (jobs.length > 0) {
        this.#start(this.#hold(jobs));
      }
      // An empty fetch keeps the mark (the group may still be at its cap); one that found all it
      // asked for doubles the next request, back to full batches within a few fetches.
      if (jobs.length >= wanted) {
        limited = limited && 2 * wanted < batchSize ? { freed: this.#freed, floor: 2 * wanted } : undefined;
      } else if (jobs.length > 0) limited = { freed: this.#freed, floor: 0 };
      if (jobs.length < wanted) {
        // Nothing more to claim now, or the remaining jobs' groups are at their cap: wait for the
        // poll interval, or for a settle (which may have freed a group's capacity); then fetch
        // once enough slots were freed since this fetch to make a batch worth its query, or
        // MIN_REFETCH_GAP_MS after it, whichever comes first.
        const freedBefore = this.#freed;
        await this.#nap(pollingIntervalMs);
        for (;;) {
          const wait = MIN_REFETCH_GAP_MS - (Date.now() - lastFetch);
          if (this.#stopping || wait <= 0 || this.#freed - freedBefore >= this.#refetchAfter) break;
          await this.#nap(wait);
        }
      }
    }
  }

  #fetch(batchSize: number): Promise<JobWithMetadata<T>[]> {
    const { groupConcurrency, maxInFlight } = this.#options;
    if (!groupConcurrency) return this.#boss.fetch<T>(this.#name, { batchSize, includeMetadata: true });
    // Only the reserve is free: it goes to groups holding no job here.
    const reserved = maxInFlight - this.#held.size <= reservedSlots(maxInFlight);
    const ignoreGroups = reserved ? [...this.#groups.keys()] : [];
    return this.#boss.fetch<T>(this.#name, {
      batchSize,
      includeMetadata: true,
      groupConcurrency,
      ...(ignoreGroups.length > 0 ? { ignoreGroups } : {}),
    });
  }

  /** Groups holding jobs here (for tests and diagnostics). */
  get groupsHolding(): number {
    return this.#groups.size;
  }

  /** Holds claimed jobs (they count against maxInFlight and get heartbeats from now). */
  #hold(jobs: readonly JobWithMetadata<T>[]): Held[] {
    return jobs.map((job) => {
      const abort = new AbortController();
      const group = job.groupId ?? undefined;
      // Claimed again while its earlier claim (lapsed) is still held here: that one is forgotten,
      // its settle ignored (#settle), so its group's count goes now, not never.
      const earlier = this.#held.get(job.id);
      if (earlier) this.#release(earlier);
      if (group !== undefined) this.#groups.set(group, (this.#groups.get(group) ?? 0) + 1);
      const held: Held = {
        group,
        job: {
          id: job.id,
          data: job.data,
          retryCount: job.retryCount,
          retryLimit: job.retryLimit,
          signal: abort.signal,
          stopping: this.#stop.signal,
          settler: this.#options.settler,
        },
        abort,
      };
      this.#held.set(job.id, held);
      return held;
    });
  }

  /** Runs the handler on held jobs and settles each as its promise settles. */
  #start(claimed: Held[]): void {
    let promises: Promise<undefined | typeof SETTLED>[];
    try {
      promises = this.#handler(claimed.map((held) => held.job as ClaimedJob<T>));
    } catch (error) {
      promises = claimed.map(() => Promise.reject(error));
    }
    claimed.forEach((held, index) => {
      const promise =
        promises[index] ?? Promise.reject(new Error('The handler returned no promise for this job'));
      promise.then(
        (result) => this.#settle(held, { status: result === SETTLED ? 'settled' : 'completed' }),
        (error: unknown) =>
          this.#settle(held, {
            status: (error as { deadLetter?: boolean } | null)?.deadLetter ? 'deadletter' : 'failed',
            message: error instanceof Error ? error.message : String(error),
          }),
      );
    });
  }

  #unsettled(): Held[] {
    return [...this.#held.values()].filter((held) => !held.settlement);
  }

  /** Queues a job's settle; the first settle wins (a late handler after stop() is ignored). */
  #settle(held: Held, settlement: Settlement): void {
    if (held.settlement || this.#held.get(held.job.id) !== held) return;
    held.settlement = settlement;
    this.#settled.push(held);
    if (this.#flushActive) return; // the running flush takes it before it ends
    this.#flushActive = true;
    this.#flushing = this.#flush();
  }

  /**
   * Writes queued settles to pg-boss, a group at a time, then frees their slots (a job its handler
   * settled itself only frees its slot).
   */
  async #flush(): Promise<void> {
    try {
      while (this.#settled.length > 0) {
        const group = this.#settled;
        this.#settled = [];
        const attempt = (held: Held) => ({ id: held.job.id, retryCount: held.job.retryCount });
        const completed = group.filter((held) => held.settlement?.status === 'completed');
        const failed = group.filter((held) => held.settlement?.status === 'failed');
        const deadLettered = group.filter((held) => held.settlement?.status === 'deadletter');
        try {
          if (completed.length > 0) await this.#boss.complete(this.#name, completed.map(attempt));
          for (const [message, jobs] of byMessage(failed)) {
            await this.#boss.fail(this.#name, jobs.map(attempt), { message });
          }
          for (const held of deadLettered) {
            await this.#options.deadLetter(held.job, messageOf(held));
          }
        } catch (error) {
          // The jobs stay active in pg-boss; their heartbeat lapses and the queue retries them (a
          // retried email already recorded is skipped by its handler).
          this.#options.onError(error);
        }
        for (const held of group) this.#release(held);
        this.#freed += group.length;
        this.#wakeUp();
      }
    } finally {
      // In the same step as the loop's last look at #settled (not a microtask later, as a
      // `.finally()` would be): a settle after this starts a flush of its own.
      this.#flushActive = false;
    }
  }

  /** Frees a settled job's slot (and its group's count). */
  #release(held: Held): void {
    if (this.#held.get(held.job.id) !== held) return;
    this.#held.delete(held.job.id);
    if (held.group === undefined) return;
    const left = (this.#groups.get(held.group) ?? 1) - 1;
    if (left > 0) this.#groups.set(held.group, left);
    else this.#groups.delete(held.group);
  }

  /** Refreshes the heartbeat of held jobs; aborts those whose claim lapsed (another may run them). */
  async #touch(): Promise<void> {
    const held = [...this.#held.values()].filter((h) => !h.settlement);
    if (held.length === 0) return;
    try {
      const response = (await this.#boss.touch(
        this.#name,
        held.map((h) => ({ id: h.job.id, retryCount: h.job.retryCount })),
      )) as { settled?: string[] };
      if (!response.settled) return;
      const alive = new Set(response.settled);
      for (const h of held) {
        if (!alive.has(h.job.id) && !h.settlement)
          h.abort.abort(new Error('the job was claimed again elsewhere'));
      }
    } catch (error) {
      this.#options.onError(error);
    }
  }

  /** Sleeps up to `ms`, or until a settle or stop() wakes the loop (also one that came before). */
  #nap(ms: number): Promise<void> {
    if (this.#wakePending) {
      this.#wakePending = false;
      return Promise.resolve();
    }
    return new Promise((resolve) => {
      const done = () => {
        clearTimeout(timer);
        this.#wake = undefined;
        resolve();
      };
      const timer = setTimeout(done, ms);
      this.#wake = done;
    });
  }

  #wakeUp(): void {
    if (this.#wake) this.#wake();
    else this.#wakePending = true;
  }
}

function messageOf(held: Held): string {
  return held.settlement && 'message' in held.settlement ? held.settlement.message : '';
}

function byMessage(items: Held[]): Map<string, Held[]> {
  const groups = new Map<string, Held[]>();
  for (const held of items) {
    const message = messageOf(held);
    groups.set(message, [...(groups.get(message) ?? []), held]);
  }
  return groups;
}

function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}
