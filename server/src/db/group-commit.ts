import type { Database, Executor } from './client.ts';

/** How a {@link GroupCommit} forms its batches. */
export interface GroupCommitOptions<T> {
  /**
   * Writes `items` inside `tx` (multi-row statements). Throws when any item cannot be written;
   * it is then called again with one item at a time, each in its own savepoint.
   */
  write: (tx: Executor, items: T[]) => Promise<void>;
  /**
   * Optional: writes a whole batch itself, on the database rather than in a transaction opened
   * for it — as one atomic statement (no BEGIN and COMMIT round trips), or in a transaction of its
   * own. When it throws, the batch falls back to `write`, one item at a time in savepoints.
   */
  writeBatch?: (db: Database, items: T[]) => Promise<void>;
  /** Most items one transaction carries. */
  maxBatch: number;
  /**
   * How long (ms) the first item of a batch waits for company while a transaction slot is free;
   * 0 = until the current turn of the event loop ends (setImmediate), which adds no timer delay.
   */
  windowMs: number;
  /** Transactions open at once (each holds one pooled connection). */
  maxInFlight: number;
  /**
   * Optional group-commit delay (PostgreSQL's `commit_delay` idea, for batches): when a batch
   * finishes and fewer than `items` wait, the next batch waits up to `waitMs` (ms) for more, and
   * starts at once when `items` are there. Under load, fewer and larger batches (a statement's
   * fixed cost spread over more items); an idle one's first item still starts as `windowMs` says.
   */
  fill?: { items: number; waitMs: number };
}

interface Waiting<T> {
  item: T;
  resolve: () => void;
  reject: (error: unknown) => void;
}

/**
 * Group commit (issue #9 "Group-commit accept"): items submitted at about the same time share one
 * database transaction. Each `submit` resolves once its item is committed, or rejects with that
 * item's own error: when the batch fails, the items are written again in ONE transaction with a
 * savepoint each, so an item that violates a constraint fails alone and the rest commit together.
 * A batch starts when `maxBatch` items wait, when the window after its first item ends, or when a
 * running transaction finishes and items are waiting; at most `maxInFlight` run at once.
 */
export class GroupCommit<T> {
  readonly #db: Database;
  readonly #options: GroupCommitOptions<T>;
  #pending: Waiting<T>[] = [];
  #inFlight = 0;
  #timer: NodeJS.Timeout | NodeJS.Immediate | undefined;
  /** Whether {@link #timer} is the fill delay (see GroupCommitOptions.fill). */
  #filling = false;
  /** Batches committed so far and the items they carried (for tests and diagnostics). */
  readonly stats = { batches: 0, items: 0, isolatedBatches: 0 };

  constructor(db: Database, options: GroupCommitOptions<T>) {
    if (options.maxBatch < 1 || options.maxInFlight < 1 || options.windowMs < 0) {
      throw new Error('GroupCommit: maxBatch and maxInFlight must be ≥ 1 and windowMs ≥ 0');
    }
    if (options.fill && (options.fill.items < 1 || options.fill.waitMs < 0)) {
      throw new Error('GroupCommit: fill.items must be ≥ 1 and fill.waitMs ≥ 0');
    }
    this.#db = db;
    this.#options = options;
  }

  /** Set by {@link refuseNew}: what items submitted from then on reject with. */
  #refusal: { error: unknown } | undefined;

  /**
   * From now on every item submitted is refused with `error` (nothing of it written); items already
   * submitted still commit ({@link drain} waits for them). A stopping server calls it before it
   * cuts the connections of requests still in progress: such a request's client sees its
   * connection drop, so its email must not be accepted behind its back (a client retrying then
   * sent it twice; review finding, session 18).
   */
  refuseNew(error: unknown): void {
    this.#refusal = { error };
  }

  /** Queues `item` for the next batch; resolves when it is committed, rejects with its own error. */
  submit(item: T): Promise<void> {
    if (this.#refusal) return Promise.reject(this.#refusal.error);
    return new Promise<void>((resolve, reject) => {
      this.#pending.push({ item, resolve, reject });
      this.#schedule();
    });
  }

  /**
   * Commits `items` together in ONE transaction of their own (the batch send endpoint, issue #10),
   * with the same fallback as {@link submit}: when the transaction fails, each item is written in
   * its own savepoint of one transaction, so an item that cannot be written fails alone. Does not
   * wait for a free slot (one caller's items never share a transaction with others').
   * Returns each item's outcome, in order; rejects with {@link refuseNew}'s error, nothing written,
   * once new items are refused.
   */
  submitTogether(items: readonly T[]): Promise<PromiseSettledResult<void>[]> {
    // Refused whole, not item by item: a batch whose items all came back refused inside its 202
    // was stored under its Idempotency-Key and replayed to the client's retry (review finding,
    // session 18); a rejection fails the request, which releases the key. Before the empty case:
    // a batch whose every item failed when the stop abandoned its PDF renders is empty here, and
    // its 202 of errors was stored the same way (review of session 20's diff).
    if (this.#refusal) return Promise.reject(this.#refusal.error);
    if (items.length === 0) return Promise.resolve([]);
    const batch: Waiting<T>[] = [];
    const settled = items.map(
      (item) => new Promise<void>((resolve, reject) => batch.push({ item, resolve, reject })),
    );
    this.#inFlight++;
    void this.#commit(batch).finally(() => {
      this.#inFlight--;
      if (this.#pending.length > 0) this.#startBatch();
    });
    return Promise.allSettled(settled);
  }

  /** Resolves once no item is waiting and no transaction is open (call before closing the database). */
  async drain(): Promise<void> {
    while (this.#pending.length > 0 || this.#inFlight > 0) {
      await new Promise((resolve) => setTimeout(resolve, 5));
    }
  }

  #schedule(): void {
    if (this.#inFlight >= this.#options.maxInFlight) return; // a finishing batch takes them
    if (
      this.#pending.length >= this.#options.maxBatch ||
      (this.#filling && this.#pending.length >= this.#options.fill!.items)
    ) {
      this.#startBatch();
      return;
    }
    if (this.#timer) return;
    const fire = () => {
      this.#timer = undefined;
      this.#startBatch();
    };
    this.#timer =
      this.#options.windowMs === 0 ? setImmediate(fire) : setTimeout(fire, this.#options.windowMs);
  }

  /** A batch finished with items waiting: the next starts now, or after the fill delay. */
  #next(): void {
    if (this.#pending.length === 0) return;
    const { fill } = this.#options;
    if (!fill || fill.waitMs === 0 || this.#pending.length >= fill.items) {
      this.#startBatch();
      return;
    }
    if (this.#timer) return;
    this.#filling = true;
    this.#timer = setTimeout(() => {
      this.#timer = undefined;
      this.#startBatch();
    }, fill.waitMs);
  }

  #startBatch(): void {
    this.#filling = false;
    if (this.#timer) {
      clearTimeout(this.#timer as NodeJS.Timeout);
      clearImmediate(this.#timer as NodeJS.Immediate);
      this.#timer = undefined;
    }
    while (this.#pending.length > 0 && this.#inFlight < this.#options.maxInFlight) {
      const batch = this.#pending.splice(0, this.#options.maxBatch);
      this.#inFlight++;
      void this.#commit(batch).finally(() => {
        this.#inFlight--;
        // Whatever arrived meanwhile has already waited a whole transaction: no further window
        // (only the fill delay, when one is set).
        this.#next();
      });
    }
  }

  async #commit(batch: Waiting<T>[]): Promise<void> {
    try {
      const items = batch.map((w) => w.item);
      const { writeBatch } = this.#options;
      if (writeBatch) await writeBatch(this.#db, items);
      else await this.#db.transaction((tx) => this.#options.write(tx, items));
      this.#count(batch.length);
      for (const waiting of batch) waiting.resolve();
      return;
    } catch (error) {
      if (batch.length === 1) {
        batch[0]!.reject(error);
        return;
      }
    }
    await this.#commitIsolated(batch);
  }

  /** The fallback: one transaction, a savepoint per item; failed items get their own error. */
  async #commitIsolated(batch: Waiting<T>[]): Promise<void> {
    const failures = new Map<Waiting<T>, unknown>();
    try {
      await this.#db.transaction(async (tx) => {
        for (const waiting of batch) {
          try {
            await tx.transaction((savepoint) => this.#options.write(savepoint, [waiting.item]));
          } catch (error) {
            failures.set(waiting, error);
          }
        }
      });
    } catch (error) {
      for (const waiting of batch) waiting.reject(failures.get(waiting) ?? error);
      return;
    }
    this.stats.isolatedBatches++;
    this.#count(batch.length - failures.size);
    for (const waiting of batch) {
      if (failures.has(waiting)) waiting.reject(failures.get(waiting));
      else waiting.resolve();
    }
  }

  #count(items: number): void {
    this.stats.batches++;
    this.stats.items += items;
  }
}
