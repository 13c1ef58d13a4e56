import { LRUCache } from 'lru-cache';
import type { Config } from '../../config.ts';
import type { Database } from '../../db/client.ts';
import { messageForLog } from '../../db/errors.ts';
import { StatisticsChecks } from '../../db/stale-statistics.ts';
import { newId } from '../../ids.ts';
import { reservedSlots } from '../../reserved-slots.ts';
import { type AttemptOutcome, attemptDelivery } from './webhook-attempt.ts';
import { type WebhookClient, webhookClientFor } from './webhook-client.ts';
import { onOutboxWrite } from './webhook-outbox.ts';
import { type RecordedAttempt, WebhookAttemptRecorder } from './webhook-recorder.ts';
import { type ClaimedAttempt, type WebhookRow, webhookRepository } from './webhooks.repository.ts';

/**
 * How long a claimed outbox row stays the claimant's (s): its `leased_until` moves this far ahead at the
 * claim and at every heartbeat ({@link LEASE_REFRESH_MS}); a worker killed mid-attempt leaves its
 * rows to be claimed again at most this long after its last heartbeat (issue #11 crash test).
 */
export const WEBHOOK_LEASE_SECONDS = 30;
/** How often the dispatcher extends the leases of the rows it holds (ms). */
const LEASE_REFRESH_MS = 10_000;
/**
 * Claims of a message lost without a record (its worker died, or its recording failed) after which
 * its row is given up: recorded as a failed, final attempt without a request (e.g. a body that
 * crashes the worker). Rows a stopping worker gives back unstarted do not count.
 */
export const MAX_LOST_CLAIMS = 5;
/** Wait between fetches while idle (ms): the pick-up delay of rows other processes write. */
const IDLE_POLL_MS = 500;
/**
 * Wait between fetches while busy (a fetch found rows within BUSY_WINDOW_MS), doubled after each
 * empty fetch in a row up to IDLE_POLL_MS: a webhook at its cap with a backlog keeps the
 * dispatcher busy (its rows come by hand-off) while each fetch, which skips that webhook's rows
 * one by one in due order, finds nothing.
 */
const BUSY_POLL_MS = 50;
const BUSY_WINDOW_MS = 2_000;
/** After a nudge (this process wrote outbox rows, not yet committed), poll this often (ms)… */
const NUDGE_POLL_MS = 20;
/** …for this long (ms). */
const NUDGE_WINDOW_MS = 100;
/**
 * Free slots that wake the loop for a fetch when an attempt ends (fewer wait for the poll): a fetch
 * costs PostgreSQL about a millisecond whatever it finds (issue #11 bench).
 */
const REFETCH_AFTER = 30;
/**
 * Rows claimed ahead of the request slots, as a multiple of them (per webhook and per process): a
 * slot freed by a response starts its webhook's next row at once, while the response's recording
 * and the claim of its replacement (one statement per group, one group at a time) run behind.
 * The rows waiting for a slot must last while that refill comes: a group waits up to
 * RECORDING_FILL.waitMs (10 ms) to fill, then its statement runs (~4-5 ms of PostgreSQL CPU for
 * 200 rows at ~21 µs each), while a fast receiver answers a slot every few milliseconds — about
 * three slots' worth of rows, hence 1 (the requests) + 3. With 2, a busy webhook had no row
 * waiting for a slot in 53-62 % of 1 ms samples of a drain and nothing in flight in at least one
 * sample of ten; bench:webhooks, runs alternated on one machine (session 24): 0.49-0.55× raw
 * with 2, 0.58-0.60× with 3, 0.61-0.67× with 4, 0.56-0.58× with 6, at the same CPU per delivery.
 * With rows only for the slots, each slot stood empty from its response to the commit of the
 * statement that refilled it.
 */
export const CLAIM_AHEAD = 4;
/** Webhook rows kept from earlier lookups, reused while their `updatedAt` is unchanged. */
const WEBHOOK_ROWS_KEPT = 1_000;
/**
 * A claimed row that waited this long for its request slot (ms) reads its webhook again before
 * the request (at most one read per webhook per this interval): its claim's lookup may predate a
 * delete, a disabling, or a new URL or secret. With the claim's lookup alone, rows claimed ahead
 * behind a slow receiver (up to twice the per-webhook cap, each request up to
 * WEBHOOK_TIMEOUT_SECONDS) still went to a deleted webhook's or the old URL for minutes (review
 * finding, session 18). README "Webhooks": a change reaches every request started a second after it.
 */
export const WEBHOOK_RECHECK_MS = 1_000;

/**
 * Requests to one webhook in flight at once in one worker process (the dispatcher's cap): half its
 * WORKER_CONCURRENCY slots, so one slow receiver (each attempt may wait WEBHOOK_TIMEOUT_SECONDS)
 * leaves the other half to every other webhook, while a fast one gets enough concurrency to keep up.
 */
export function webhookDeliveriesInFlight(config: Pick<Config, 'WORKER_CONCURRENCY'>): number {
  return Math.max(1, Math.floor(config.WORKER_CONCURRENCY / 2));
}

/** A claimed row waiting for a request slot, with its claim's webhook lookup and when it was claimed. */
interface Waiting {
  row: ClaimedAttempt;
  webhooks: Promise<Map<string, WebhookRow | undefined>>;
  /** performance.now() when the dispatcher took the row (ms). */
  claimedAt: number;
}

/** What the dispatcher needs (the worker's context provides it). */
export interface WebhookDispatcherDeps {
  db: Database;
  encryptionKey: Buffer;
  config: Pick<
    Config,
    'WEBHOOK_RETRY_SCHEDULE' | 'WEBHOOK_TIMEOUT_SECONDS' | 'WEBHOOKS_ALLOW_PRIVATE' | 'WORKER_CONCURRENCY'
  >;
  /** The HTTP client (default: the process's, see webhookClientFor). */
  client?: WebhookClient;
  /** Reports a failed fetch, heartbeat or recording (default: console.error). */
  onError?: (error: unknown) => void;
}

/**
 * The webhook delivery worker (issue #11: deliveries go through the batched worker, not one loop
 * per webhook): claims due rows of the outbox (`webhook_outbox`, webhook-outbox.ts) and makes each
 * one signed POST ({@link attemptDelivery}) — up to WORKER_CONCURRENCY requests in flight per
 * process, at most {@link webhookDeliveriesInFlight} of them to one webhook, with up to
 * {@link CLAIM_AHEAD} times as many rows claimed so a freed slot starts its next row at once — and
 * records each with the group-commit recorder, which deletes the row (success, final failure, 410)
 * or reschedules it as the next attempt after WEBHOOK_RETRY_SCHEDULE[n-1] seconds, up to 1 + the
 * schedule's length attempts, and claims due rows in the finished ones' place in the same statement.
 * A row of a deleted or disabled webhook is deleted without a request. Claimed rows are leased
 * ({@link WEBHOOK_LEASE_SECONDS}, extended every {@link LEASE_REFRESH_MS} while held): a worker that
 * dies leaves them to be claimed again when the lease lapses — the receiver may then get an attempt
 * twice, with the same `webhook-id` (spec "Events": receivers deduplicate), and none is lost.
 * The per-webhook cap is per process (each worker process counts its own requests).
 */
export class WebhookDispatcher {
  readonly #deps: WebhookDispatcherDeps;
  readonly #client: WebhookClient;
  readonly #recorder: WebhookAttemptRecorder;
  /** Requests in flight at once in this process (WORKER_CONCURRENCY). */
  readonly #maxRequests: number;
  /** Requests to one webhook in flight at once in this process (webhookDeliveriesInFlight). */
  readonly #cap: number;
  readonly #onError: (error: unknown) => void;
  /** Claimed rows this process holds (waiting, requesting or being recorded), by row id. */
  readonly #held = new Map<string, ClaimedAttempt>();
  /**
   * Rows held per webhook whose request has not ended (waiting or requesting; at most CLAIM_AHEAD ×
   * the cap). A row whose request ended, held only until its record commits, counts no more: the
   * claims' caps bound the rows ahead of a webhook's requests, and the recorder's group-commit
   * delay (RECORDING_FILL) keeps ended rows held for up to its wait. Counted, they took two
   * thirds of a busy webhook's cap, and its requests in flight fell to ~45 of 100 (bench:webhooks,
   * session 23, sampled every ms).
   */
  readonly #perWebhook = new Map<string, number>();
  /** Rows held per team whose request has not ended (at most CLAIM_AHEAD × the cap, however many webhooks it has). */
  readonly #perTeam = new Map<string, number>();
  /** The held rows counted in #perWebhook and #perTeam (their request has not ended). */
  readonly #counted = new Set<string>();
  /** Requests in flight per team (at most the cap: two slow webhooks of one team leave half the slots). */
  readonly #teamRequests = new Map<string, number>();
  /** Claimed rows waiting for a request slot, per webhook, in claim order. */
  readonly #waiting = new Map<string, Waiting[]>();
  /** Requests in flight per webhook, and in all. */
  readonly #requests = new Map<string, number>();
  #requesting = 0;
  /**
   * Webhook versions (`id@updatedAt`) that answered 410 Gone here: their rows still waiting are
   * dropped unsent, not sent before the recording of the 410 disables the webhook (review finding,
   * session 15: up to a worker's claimed rows went out after the receiver said Gone).
   */
  readonly #gone = new LRUCache<string, true>({ max: WEBHOOK_ROWS_KEPT });
  /** The webhooks' rows as last read, reused while a claim saw the same `updatedAt`. */
  readonly #rows = new LRUCache<string, WebhookRow>({ max: WEBHOOK_ROWS_KEPT });
  /** The latest re-read of each webhook ({@link WEBHOOK_RECHECK_MS}), shared by the rows starting meanwhile. */
  readonly #rechecks = new LRUCache<string, Promise<WebhookRow | undefined>>({
    max: WEBHOOK_ROWS_KEPT,
    ttl: WEBHOOK_RECHECK_MS,
  });
  #stopping = false;
  #loop: Promise<void> | undefined;
  #wake: (() => void) | undefined;
  #emptyFetches = 0;
  #busyUntil = 0;
  #nudgedUntil = 0;
  #heartbeat: NodeJS.Timeout | undefined;
  #unsubscribe: (() => void) | undefined;
  /** Give-backs under way (stop waits for them). */
  readonly #givingBack = new Set<Promise<void>>();
  /** Resolves when nothing is held (stop waits for it). */
  #drained: (() => void) | undefined;
  /** When this process last checked the outbox's statistics (refreshStaleStatistics). */
  readonly #statisticsChecks = new StatisticsChecks();

  constructor(deps: WebhookDispatcherDeps) {
    this.#deps = deps;
    this.#client = deps.client ?? webhookClientFor(deps.config);
    this.#maxRequests = deps.config.WORKER_CONCURRENCY;
    this.#cap = webhookDeliveriesInFlight(deps.config);
    this.#onError = deps.onError ?? ((error) => console.error('[webhooks]', messageForLog(error)));
    this.#recorder = new WebhookAttemptRecorder(
      deps.db,
      (items) => this.#handoffFor(items),
      (rows) => this.#run(rows),
    );
  }

  /** Starts claiming (idempotent until stopped). */
  start(): void {
    if (this.#loop) return;
    this.#unsubscribe = onOutboxWrite(() => this.nudge());
    this.#heartbeat = setInterval(() => void this.#extendLeases(), LEASE_REFRESH_MS);
    this.#heartbeat.unref();
    this.#loop = this.#fetchLoop();
  }

  /** Rows were written to the outbox in this process: poll briefly at a short interval. */
  nudge(): void {
    this.#nudgedUntil = Date.now() + NUDGE_WINDOW_MS;
    this.#wake?.();
  }

  /**
   * Stops claiming and waits up to `timeoutMs` for the attempts in flight to be recorded; rows
   * still held after that stay leased and are attempted again when their lease lapses.
   */
  async stop(timeoutMs: number): Promise<void> {
    this.#stopping = true;
    this.#unsubscribe?.();
    this.#wake?.();
    await this.#loop;
    // Rows claimed ahead and not started go back at once, for any worker; so do rows a recording
    // claims from now on (see #run).
    const unstarted = [...this.#waiting.values()].flat().map(({ row }) => row);
    this.#waiting.clear();
    await this.#giveBack(unstarted);
    if (this.#held.size > 0) {
      let timer: NodeJS.Timeout | undefined;
      await Promise.race([
        new Promise<void>((resolve) => {
          this.#drained = resolve;
        }),
        new Promise<void>((resolve) => {
          timer = setTimeout(resolve, timeoutMs);
        }),
      ]);
      clearTimeout(timer);
    }
    await Promise.all(this.#givingBack);
    clearInterval(this.#heartbeat);
  }

  /** Gives claimed rows back unstarted (their claim not counted as lost), then lets go of them. */
  #giveBack(rows: ClaimedAttempt[]): Promise<void> {
    if (rows.length === 0) return Promise.resolve();
    const done = webhookRepository
      .releaseClaims(this.#deps.db, rows)
      .catch((error: unknown) => this.#onError(error))
      .finally(() => {
        for (const row of rows) this.#release(row);
        this.#givingBack.delete(done);
      });
    this.#givingBack.add(done);
    return done;
  }

  /** Rows held now: waiting, requesting or being recorded (for tests and diagnostics). */
  get held(): number {
    return this.#held.size;
  }

  async #fetchLoop(): Promise<void> {
    while (!this.#stopping) {
      const free = this.#free();
      let full = false;
      if (free > 0) {
        try {
          const rows = await webhookRepository.claimAttempts(this.#deps.db, this.#fetchClaim(free));
          if (rows.length > 0) {
            this.#emptyFetches = 0;
            this.#busyUntil = Date.now() + BUSY_WINDOW_MS;
            this.#run(rows);
            // Rows came: make sure the claims' plans know how many (checked at most once a minute).
            if (this.#statisticsChecks.due('webhook_outbox'))
              webhookRepository.refreshStaleStatistics(this.#deps.db).catch(this.#onError);
          } else this.#emptyFetches++;
          full = rows.length === free;
        } catch (error) {
          this.#onError(error);
        }
      }
      if (full || this.#stopping) continue;
      await this.#sleep(this.#pollDelay());
    }
  }

  /** The wait before the next fetch (ms), see the constants above. */
  #pollDelay(): number {
    const now = Date.now();
    if (now < this.#nudgedUntil) return NUDGE_POLL_MS;
    if (now >= this.#busyUntil) return IDLE_POLL_MS;
    return Math.min(IDLE_POLL_MS, BUSY_POLL_MS * 2 ** Math.max(0, this.#emptyFetches - 1));
  }

  #sleep(ms: number): Promise<void> {
    return new Promise((resolve) => {
      const timer = setTimeout(done, ms);
      function done() {
        clearTimeout(timer);
        resolve();
      }
      this.#wake = () => {
        this.#wake = undefined;
        done();
      };
    });
  }

  /** A claim of up to `limit` rows with this process's per-webhook and per-team counts. */
  #claim(limit: number) {
    const inFlight: Record<string, number> = {};
    const capped: string[] = [];
    for (const [webhookId, held] of this.#perWebhook) {
      inFlight[webhookId] = held;
      if (held >= CLAIM_AHEAD * this.#cap) capped.push(webhookId);
    }
    const teamInFlight: Record<string, number> = {};
    const cappedTeams: string[] = [];
    for (const [teamId, held] of this.#perTeam) {
      teamInFlight[teamId] = held;
      if (held >= CLAIM_AHEAD * this.#cap) cappedTeams.push(teamId);
    }
    return {
      limit,
      leaseSeconds: WEBHOOK_LEASE_SECONDS,
      cap: CLAIM_AHEAD * this.#cap,
      inFlight,
      teamInFlight,
      capped,
      cappedTeams,
    };
  }

  /**
   * The fetch loop's claim of up to `free` rows, leaving the reserve of the claimed rows
   * ({@link reservedSlots}) to teams holding none here: once only the reserve is free, every team
   * holding rows is capped for the claim (two teams whose receivers hang otherwise held every row
   * a worker may claim, and every other team's deliveries waited; review finding, session 15).
   */
  #fetchClaim(free: number) {
    const reserve = reservedSlots(CLAIM_AHEAD * this.#maxRequests);
    if (free > reserve) return this.#claim(free - reserve);
    const claim = this.#claim(free);
    return { ...claim, cappedTeams: [...new Set([...claim.cappedTeams, ...this.#perTeam.keys()])] };
  }

  /**
   * Rows this process may claim now: up to CLAIM_AHEAD × WORKER_CONCURRENCY whose request has not
   * ended (see #perWebhook), and no more than twice that held in all (rows whose request ended
   * wait for their record: a stalled database does not make them pile up); `leaving`: held rows
   * about to be let go (a hand-off's group).
   */
  #free(leaving = 0): number {
    const capacity = CLAIM_AHEAD * this.#maxRequests;
    return Math.min(capacity - this.#counted.size, 2 * capacity - (this.#held.size - leaving));
  }

  /**
   * The hand-off of a group about to be recorded: as many rows as it finishes (none when stopping).
   * Its rows' requests have all ended (#attempt), so they are out of the per-webhook and per-team
   * counts already; they still count as held until the group commits.
   */
  #handoffFor(items: readonly RecordedAttempt[]) {
    if (this.#stopping) return undefined;
    let count = 0;
    for (const { row } of items) if (row && this.#held.has(row.id)) count++;
    // No further than the reserve of claimed rows ({@link reservedSlots}): the fetch loop gives it
    // to teams holding none (hand-offs of a hanging team's backlog otherwise refilled it at once).
    const limit = Math.min(count, this.#free(count) - reservedSlots(CLAIM_AHEAD * this.#maxRequests));
    return limit > 0 ? this.#claim(limit) : undefined;
  }

  /**
   * Takes claimed rows: holds each until its attempt is recorded (or its recording failed), and
   * starts as many as the request slots allow; the others wait for a slot of their webhook.
   */
  #run(rows: ClaimedAttempt[]): void {
    for (const row of rows) {
      this.#held.set(row.id, row);
      this.#counted.add(row.id);
      this.#perWebhook.set(row.webhookId, (this.#perWebhook.get(row.webhookId) ?? 0) + 1);
      this.#perTeam.set(row.teamId, (this.#perTeam.get(row.teamId) ?? 0) + 1);
    }
    // Stopping (a recording that began before stop() claimed these): back at once, unstarted.
    if (this.#stopping) {
      void this.#giveBack(rows);
      return;
    }
    const webhooks = this.#webhooksOf(rows);
    const claimedAt = performance.now();
    // Each attempt handles a failed lookup itself; none may start (all rows waiting for slots).
    webhooks.catch(() => {});
    for (const row of rows) {
      let queue = this.#waiting.get(row.webhookId);
      if (!queue) {
        queue = [];
        this.#waiting.set(row.webhookId, queue);
      }
      queue.push({ row, webhooks, claimedAt });
    }
    for (const webhookId of new Set(rows.map((row) => row.webhookId))) this.#pump(webhookId);
  }

  /** Starts waiting rows of `webhookId` while it, its team and the process have request slots free. */
  #pump(webhookId: string): void {
    const queue = this.#waiting.get(webhookId);
    if (!queue) return;
    let requests = this.#requests.get(webhookId) ?? 0;
    const open = this.#maxRequests - reservedSlots(this.#maxRequests);
    while (queue.length > 0 && requests < this.#cap && this.#requesting < this.#maxRequests) {
      const { teamId } = queue[0]!.row;
      const teamRequests = this.#teamRequests.get(teamId) ?? 0;
      if (teamRequests >= this.#cap) break;
      // The last tenth of the request slots goes only to teams with no request out
      // ({@link reservedSlots}): two teams whose receivers hang held every slot before.
      if (this.#requesting >= open && teamRequests > 0) break;
      const next = queue.shift()!;
      requests++;
      this.#teamRequests.set(teamId, teamRequests + 1);
      this.#requesting++;
      void this.#attempt(next)
        .catch((error: unknown) => this.#onError(error))
        .finally(() => this.#release(next.row));
    }
    this.#requests.set(webhookId, requests);
    if (queue.length === 0) this.#waiting.delete(webhookId);
  }

  /**
   * A request of `row`'s webhook ended: its slot goes to the next waiting row (its webhook's first,
   * then, when the process's or the team's slots were all taken, the other webhooks').
   */
  #requestDone(row: ClaimedAttempt): void {
    this.#uncount(row);
    const { webhookId, teamId } = row;
    const requests = (this.#requests.get(webhookId) ?? 1) - 1;
    if (requests > 0) this.#requests.set(webhookId, requests);
    else this.#requests.delete(webhookId);
    const teamRequests = (this.#teamRequests.get(teamId) ?? 1) - 1;
    const teamWasFull = teamRequests + 1 >= this.#cap;
    if (teamRequests > 0) this.#teamRequests.set(teamId, teamRequests);
    else this.#teamRequests.delete(teamId);
    // The open slots (all but the reserve) were all taken: rows of other webhooks may be waiting.
    const full = this.#requesting >= this.#maxRequests - reservedSlots(this.#maxRequests);
    this.#requesting--;
    this.#pump(webhookId);
    // The process's (or the team's) slots were all taken: rows of other webhooks may be waiting.
    if (full || teamWasFull) for (const waiting of [...this.#waiting.keys()]) this.#pump(waiting);
  }

  /** Takes `row` out of the per-webhook and per-team counts (once: its request ended, or it left). */
  #uncount(row: ClaimedAttempt): void {
    if (!this.#counted.delete(row.id)) return;
    const count = (this.#perWebhook.get(row.webhookId) ?? 1) - 1;
    if (count > 0) this.#perWebhook.set(row.webhookId, count);
    else this.#perWebhook.delete(row.webhookId);
    const teamCount = (this.#perTeam.get(row.teamId) ?? 1) - 1;
    if (teamCount > 0) this.#perTeam.set(row.teamId, teamCount);
    else this.#perTeam.delete(row.teamId);
  }

  /** A row's attempt is recorded (or could not be): it is no longer held. */
  #release(row: ClaimedAttempt): void {
    this.#held.delete(row.id);
    this.#uncount(row);
    if (this.#held.size === 0) this.#drained?.();
    // Free room (the hand-off refills most) worth a fetch before the poll; not after an empty
    // fetch: the due rows left are then those of webhooks at their cap (see BUSY_POLL_MS).
    if (this.#emptyFetches === 0 && this.#free() >= REFETCH_AFTER) this.#wake?.();
  }

  /**
   * The webhooks of `rows`: the kept row when the claim saw the same version (`updatedAt`), with
   * `isActive` as the claim saw it; otherwise ONE lookup for all that are not known. Undefined for
   * a webhook that is gone.
   */
  #webhooksOf(rows: readonly ClaimedAttempt[]): Promise<Map<string, WebhookRow | undefined>> {
    const known = new Map<string, WebhookRow | undefined>();
    const unknown = new Set<string>();
    for (const { webhookId, webhook: seen } of rows) {
      if (known.has(webhookId) || unknown.has(webhookId)) continue;
      const kept = this.#rows.get(webhookId);
      if (seen === null) known.set(webhookId, undefined);
      else if (kept && kept.updatedAt.getTime() === seen.updatedAtMs)
        known.set(webhookId, kept.isActive === seen.isActive ? kept : { ...kept, isActive: seen.isActive });
      else unknown.add(webhookId);
    }
    if (unknown.size === 0) return Promise.resolve(known);
    return webhookRepository.findMany(this.#deps.db, [...unknown]).then((found) => {
      for (const row of found) {
        this.#rows.set(row.id, row);
        known.set(row.id, row);
      }
      return known;
    });
  }

  /**
   * Webhook `id` as it is now (undefined: deleted), read at most once per {@link WEBHOOK_RECHECK_MS}
   * for all rows starting meanwhile; the read row is kept for later claims.
   * @throws the database's error (the attempt is then not made; its row is claimed again later).
   */
  #recheck(id: string): Promise<WebhookRow | undefined> {
    let read = this.#rechecks.get(id);
    if (!read) {
      read = webhookRepository.findMany(this.#deps.db, [id]).then(([row]) => {
        if (row) this.#rows.set(row.id, row);
        return row;
      });
      read.catch(() => this.#rechecks.delete(id));
      this.#rechecks.set(id, read);
    }
    return read;
  }

  /**
   * Makes (or drops) the attempt of a row, frees its request slot, and records it (the slot's next
   * row does not wait for the recording).
   */
  async #attempt({ row, webhooks, claimedAt }: Waiting): Promise<void> {
    let attempt: RecordedAttempt;
    let webhook: WebhookRow | undefined;
    try {
      webhook = (await webhooks).get(row.webhookId);
      if (webhook && performance.now() - claimedAt >= WEBHOOK_RECHECK_MS)
        webhook = await this.#recheck(webhook.id);
      attempt = await this.#outcomeOf(row, webhook);
    } finally {
      this.#requestDone(row);
    }
    try {
      await this.#recorder.record(attempt);
    } catch (error) {
      // A 410 whose recording failed disabled nothing: the webhook's later rows are sent again,
      // not dropped unrecorded (the row itself is claimed again when its lease lapses).
      if (webhook && attempt.outcome?.result.responseStatus === 410) {
        this.#gone.delete(`${webhook.id}@${webhook.updatedAt.getTime()}`);
      }
      throw error;
    }
  }

  /** What to record of `row`'s attempt: made now, given up, or dropped (webhook gone or disabled). */
  async #outcomeOf(row: ClaimedAttempt, webhook: WebhookRow | undefined): Promise<RecordedAttempt> {
    // A deleted or disabled webhook (or one that just answered 410): no request, the row leaves
    // with the group.
    if (!webhook?.isActive) return { row };
    const version = `${webhook.id}@${webhook.updatedAt.getTime()}`;
    if (this.#gone.has(version)) return { row };
    if (row.claims - row.attempt >= MAX_LOST_CLAIMS) return { row, outcome: abandoned(webhook, row) };
    const outcome = await attemptDelivery(this.#client, this.#deps.encryptionKey, {
      webhook,
      messageId: row.messageId,
      event: row.event,
      body: row.body,
      attempt: row.attempt,
    });
    if (outcome.result.responseStatus === 410) this.#gone.set(version, true);
    const delay = this.#deps.config.WEBHOOK_RETRY_SCHEDULE[row.attempt - 1];
    const retry = !outcome.result.success && outcome.result.responseStatus !== 410 && delay !== undefined;
    return { row, outcome, next: retry ? { attempt: row.attempt + 1, delaySeconds: delay } : undefined };
  }

  /** The heartbeat: moves the leases of the rows held forward. */
  async #extendLeases(): Promise<void> {
    const held = [...this.#held.values()].map(({ id, claims }) => ({ id, claims }));
    try {
      await webhookRepository.extendLeases(this.#deps.db, held, WEBHOOK_LEASE_SECONDS);
    } catch (error) {
      this.#onError(error);
    }
  }
}

/** The record of an attempt given up after its claimants died {@link MAX_LOST_CLAIMS} times. */
function abandoned(webhook: WebhookRow, row: ClaimedAttempt): AttemptOutcome {
  const error = `Given up: the workers that claimed this attempt stopped before recording it ${row.claims - row.attempt} times`;
  return {
    result: { success: false, responseStatus: null, responseBody: null, error, durationMs: 0 },
    delivery: {
      id: newId('webhookDelivery'),
      teamId: webhook.teamId,
      webhookId: webhook.id,
      messageId: row.messageId,
      event: row.event,
      payload: undefined,
      responseStatus: null,
      responseBody: null,
      success: false,
      attemptCount: row.attempt,
      durationMs: 0,
      error,
      createdAt: new Date(),
    },
  };
}

/**
 * Starts the webhook dispatcher of a worker process; the queue stops it with its own loops
 * (JobQueue.attach). Called by startWorkers through the webhooks module's bindings.
 */
export function startWebhookDispatcher(deps: WebhookDispatcherDeps): WebhookDispatcher {
  const dispatcher = new WebhookDispatcher(deps);
  dispatcher.start();
  return dispatcher;
}
