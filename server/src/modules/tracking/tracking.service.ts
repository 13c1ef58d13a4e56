import { createHash } from 'node:crypto';
import { and, eq, inArray, sql } from 'drizzle-orm';
import { LRUCache } from 'lru-cache';
import type { Database } from '../../db/client.ts';
import { emailEvents, emailLogs } from '../../db/schema/index.ts';
import { KeyedSlots } from '../../keyed-slots.ts';
import type { TrackingClaim } from '../../tracking/tokens.ts';
import { type StatusEvent, transitionMany } from '../emails/index.ts';

/**
 * Records one counted tracking hit (issue #11) through the one status writer (`transitionMany`,
 * emails.status.service.ts), with `detail.source = "tracking"`:
 * - an open: `opened` (history once per email; `openedAt` set once by the state machine);
 * - a click: `clicked` with `detail.url` (history once per email and URL), preceded by `opened`
 *   when no tracked open was recorded yet (a click implies an open, so `openedAt` is set too).
 * A repeated hit of the same token appends nothing: under the email row's lock the tracked events
 * already in its history are read first. An email that does not exist (deleted) is ignored; the
 * status only moves forward (a `bounced` or `spam` email keeps its status, the hit is history).
 * `at` is when the hit happened (default now).
 * @returns 'early' when the email was not `sent` yet (the hit is history only, see below), else
 *   'recorded' (also for a repeat or a deleted email).
 * @throws database errors (the route swallows them: the pixel and redirect never fail).
 */
export async function recordTrackingHit(
  db: Database,
  claim: TrackingClaim,
  at = new Date(),
): Promise<'recorded' | 'early'> {
  return db.transaction(async (tx) => {
    const [log] = await tx
      .select({ id: emailLogs.id, status: emailLogs.status })
      .from(emailLogs)
      .where(and(eq(emailLogs.id, claim.emailId), eq(emailLogs.teamId, claim.teamId)))
      .for('update');
    if (!log) return 'recorded';
    // A hit before the email's `sent` is committed (the recipient opened it within the worker's
    // recording of the hand-off) cannot move it: it is history only, marked `beforeSent`, and does
    // not count as seen for the hits after `sent`, which move it. Before, it did, and the email
    // stayed `sent` for good (review finding, session 17).
    const early = log.status === 'queued';
    const seen = await tx
      .select({ status: emailEvents.status, url: sql<string | null>`${emailEvents.detail}->>'url'` })
      .from(emailEvents)
      .where(
        and(
          eq(emailEvents.emailId, claim.emailId),
          inArray(emailEvents.status, ['opened', 'clicked']),
          sql`${emailEvents.detail}->>'source' = 'tracking'`,
          early
            ? sql`${emailEvents.detail}->>'beforeSent' = 'true'`
            : sql`${emailEvents.detail}->>'beforeSent' is null`,
        ),
      );
    const email = { id: claim.emailId, teamId: claim.teamId };
    const source = early ? { source: 'tracking', beforeSent: true } : { source: 'tracking' };
    const events: { email: typeof email; event: StatusEvent }[] = [];
    if (!seen.some((event) => event.status === 'opened')) {
      const detail = claim.kind === 'click' ? { ...source, impliedBy: 'click' } : source;
      events.push({ email, event: { status: 'opened', at, detail } });
    }
    if (claim.kind === 'click' && !seen.some((e) => e.status === 'clicked' && e.url === claim.url)) {
      events.push({ email, event: { status: 'clicked', at, detail: { ...source, url: claim.url } } });
    }
    if (events.length > 0) await transitionMany(tx, events);
    return early ? 'early' : 'recorded';
  });
}

/** Hits whose recording this process remembers as done, so repeats skip the database. */
const RECORDED_HITS_KEPT = 50_000;
/** Recordings one process runs at once (each holds a pooled connection and its email row's lock). */
export const TRACKING_RECORDINGS_IN_FLIGHT = 4;
/** Recordings waiting for one of those slots; a hit beyond them is answered but not recorded. */
export const TRACKING_RECORDINGS_WAITING = 10_000;
/** The recorder's one key in its {@link KeyedSlots}. */
const SLOTS_KEY = 'tracking';

/** What {@link TrackingRecorder.record} did with a hit. */
export type TrackingRecordResult = 'recorded' | 'repeat' | 'dropped';

/**
 * The tracking endpoints' recorder (review finding, session 14): {@link recordTrackingHit} for
 * each counted hit, without letting one link's hits take the database from everyone else. Before,
 * every hit of a valid token ran a transaction that locked its email's row, also for repeats that
 * record nothing: 3,000 concurrent hits of one pixel (anyone who received the email has its URL)
 * queued 2,995 transactions on a 5-connection pool, and another team's send took 7 s meanwhile.
 * Now, per process:
 * - a hit this process has recorded (or found recorded) is a repeat and skips the database: kept
 *   by key (open: the email; click: the email and URL; a click's implied open counts too), the
 *   last {@link RECORDED_HITS_KEPT};
 * - a hit arriving while the same one is being recorded joins that recording;
 * - at most {@link TRACKING_RECORDINGS_IN_FLIGHT} recordings run at once, at most
 *   {@link TRACKING_RECORDINGS_WAITING} wait; a hit beyond those is not recorded (tracking is
 *   best effort: its answer is the same).
 * A failed recording is not remembered: the next hit tries again.
 */
export class TrackingRecorder {
  readonly #db: Database;
  readonly #done = new LRUCache<string, true>({ max: RECORDED_HITS_KEPT });
  readonly #recording = new Map<string, Promise<TrackingRecordResult>>();
  /** One key: the process's recording slots (the keyed semaphore the send slots use). */
  readonly #slots = new KeyedSlots();

  constructor(db: Database) {
    this.#db = db;
  }

  /**
   * Records `claim`'s hit (see the class), at `at` (default now).
   * @returns 'recorded' once written or found in the history, 'repeat' when skipped as one,
   *   'dropped' when too many recordings were waiting.
   * @throws the recording's database error.
   */
  record(claim: TrackingClaim, at = new Date()): Promise<TrackingRecordResult> {
    const key = hitKey(claim);
    if (this.#done.has(key)) return Promise.resolve('repeat');
    const joined = this.#recording.get(key);
    if (joined) return joined.then(() => 'repeat');
    if (
      this.#slots.busy(SLOTS_KEY) >= TRACKING_RECORDINGS_IN_FLIGHT &&
      this.#slots.waiting(SLOTS_KEY) >= TRACKING_RECORDINGS_WAITING
    ) {
      return Promise.resolve('dropped');
    }
    const recording = (async (): Promise<TrackingRecordResult> => {
      const release = await this.#slots.acquire(SLOTS_KEY, TRACKING_RECORDINGS_IN_FLIGHT);
      let outcome: 'recorded' | 'early';
      try {
        outcome = await recordTrackingHit(this.#db, claim, at);
      } finally {
        release();
      }
      // A hit before `sent` is not remembered: the next one, after it, is the one that counts.
      if (outcome === 'early') return 'recorded';
      this.#done.set(key, true);
      if (claim.kind === 'click') this.#done.set(hitKey({ ...claim, kind: 'open' }), true);
      return 'recorded';
    })().finally(() => this.#recording.delete(key));
    this.#recording.set(key, recording);
    return recording;
  }
}

/**
 * The key a hit is remembered by: its kind, its email and, for a click, a digest of its URL (a URL
 * may be kilobytes long; the keys stay ~50 bytes, so the kept hits stay a few MB).
 */
function hitKey(claim: TrackingClaim): string {
  if (claim.kind !== 'click') return `o ${claim.emailId}`;
  return `c ${claim.emailId} ${createHash('sha256').update(claim.url).digest('base64url').slice(0, 22)}`;
}
