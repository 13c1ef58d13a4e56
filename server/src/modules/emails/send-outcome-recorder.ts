import type { Database, Executor } from '../../db/client.ts';
import { isRefusedData, messageForLog } from '../../db/errors.ts';
import { type ClaimedJob, SETTLED } from '../../jobs/queue.ts';
import type { EmailLogRow } from './emails.repository.ts';
import { emailRepository } from './emails.repository.ts';
import { type StatusEvent, transitionAtOnce, transitionMany } from './emails.status.service.ts';
import { type RefusedOutcome, recordRefusedRecipients } from './recipient-outcomes.ts';
import { statusChangeIdleCondition } from './status-listeners.ts';

/** What one delivery attempt ended with, as the worker records it. */
export type SendOutcome =
  /** The provider accepted the email (for all recipients but `refused`, issue #11). */
  | { kind: 'sent'; providerMessageId: string; attempt: number; refused?: RefusedOutcome[] }
  /** The email ends `failed` (permanent error, last attempt, or a possibly delivered one). */
  | { kind: 'failed'; message: string; attempt: number; detail: Record<string, unknown> }
  /** A transient error; the job goes back to the queue for a retry. */
  | {
      kind: 'retry';
      message: string;
      attempt: number;
      /** Never started (a stopping worker gave up its wait for a connection): no attempt counted. */
      unattempted?: true;
    };

interface Pending {
  log: Pick<EmailLogRow, 'id' | 'teamId'>;
  outcome: SendOutcome;
  job: ClaimedJob<unknown> | undefined;
  resolve(result: RecordResult): void;
  reject(error: unknown): void;
}

/** What {@link SendOutcomeRecorder.record} resolves with: SETTLED when the job was settled with it. */
export type RecordResult = undefined | typeof SETTLED;

/** Delays between tries of a group whose transaction failed (ms); then `sent` is logged as lost. */
const RETRY_DELAYS_MS = [200, 1_000, 3_000];
/** How long the first outcome waits for others to share its transaction (ms). */
const LINGER_MS = 5;
/**
 * Group transactions in progress at once: outcomes that arrive while one commits start the next
 * rather than wait for it (the groups' rows never overlap: one outcome per claimed attempt).
 */
const MAX_CONCURRENT_WRITES = 2;
/**
 * How long (ms) after a one-statement recording found a status listener with work to do (e.g. a
 * webhook subscribed) the teams of its group are recorded in a transaction straight away. A hint
 * only: the one-statement path checks the listener's condition itself whenever it is tried.
 */
const LISTENED_TEAM_MS = 5_000;

/**
 * Records delivery outcomes by group commit: outcomes that arrive within a few ms share one
 * transaction (status moves + history through {@link transitionMany}, attempt counts, and the
 * settling of their jobs), up to {@link MAX_CONCURRENT_WRITES} such transactions at once, so a job
 * whose send finished early is not held back by the slowest send of its batch, and sends never wait
 * for a commit.
 *
 * Given the outcome's claimed `job`, the same transaction settles it in the queue (issue #9: the
 * outcome and the job's completion commit together, one commit instead of two): completed for
 * `sent` and `failed`, failed (the queue retries it) for `retry`; `record` then resolves with
 * SETTLED once committed, and the caller has nothing left to do for the job.
 *
 * A group whose outcomes are all final and whose teams' status changes the listener has nothing to
 * write for (no webhook subscribed to them) is recorded in ONE statement outside a transaction:
 * history, status moves and the jobs' completion, all conditional on the listener's condition
 * (see #writeInOneStatement); any other group in a transaction as above.
 *
 * Failures. The "never send twice after a hand-off" rule: a `sent` outcome never rejects — when the
 * database stays unreachable after the retries, the loss of its status is logged and it resolves
 * (without SETTLED), so its job is completed the usual way instead of sending again. A `failed` or
 * `retry` outcome rejects then, so its job goes back to the queue.
 */
export class SendOutcomeRecorder {
  readonly #db: Database;
  #pending: Pending[] = [];
  #timer: NodeJS.Timeout | undefined;
  #writing = 0;
  /** Teams whose status changes the listener recently had work for, until when (ms since the epoch). */
  readonly #listenedTeams = new Map<string, number>();

  constructor(db: Database) {
    this.#db = db;
  }

  /**
   * Records `outcome` for `log`, and settles `job` with it when given; resolves once committed,
   * with SETTLED when `job` was settled (see the class for failures).
   */
  record(
    log: Pick<EmailLogRow, 'id' | 'teamId'>,
    outcome: SendOutcome,
    job?: ClaimedJob<unknown>,
  ): Promise<RecordResult> {
    return new Promise((resolve, reject) => {
      this.#pending.push({ log, outcome: storableOutcome(outcome), job, resolve, reject });
      this.#schedule();
    });
  }

  /** Starts the next group after the linger, unless one is due or enough are being written. */
  #schedule(): void {
    if (this.#timer || this.#writing >= MAX_CONCURRENT_WRITES || this.#pending.length === 0) return;
    this.#timer = setTimeout(() => {
      this.#timer = undefined;
      // A writer that finished meanwhile may have taken the pending outcomes, or the last slot.
      if (this.#writing < MAX_CONCURRENT_WRITES) void this.#writeNext();
    }, LINGER_MS);
  }

  async #writeNext(): Promise<void> {
    const group = this.#pending;
    this.#pending = [];
    if (group.length === 0) return;
    this.#writing += 1;
    try {
      await this.#write(group);
    } finally {
      this.#writing -= 1;
      // Outcomes that waited for a free writer have lingered long enough.
      if (this.#pending.length > 0 && !this.#timer) void this.#writeNext();
    }
  }

  async #write(group: Pending[]): Promise<void> {
    for (let attempt = 0; ; attempt++) {
      try {
        if (await this.#writeInOneStatement(group)) {
          for (const item of group) item.resolve(SETTLED);
          return;
        }
        await this.#db.transaction(async (tx) => {
          const moves = group.flatMap((item) => {
            const event = statusEventOf(item.outcome);
            return event ? [{ email: item.log, event }] : [];
          });
          await transitionMany(tx, moves);
          // Issue #11: rows only for recipients refused at RCPT; no statement when there are none.
          await recordRefusedRecipients(
            tx,
            group.flatMap(({ log, outcome }) =>
              outcome.kind === 'sent' && outcome.refused?.length
                ? [{ email: log, refused: outcome.refused }]
                : [],
            ),
          );
          await emailRepository.recordAttempts(
            tx,
            group.flatMap(({ log, outcome }) =>
              outcome.kind === 'retry' && !outcome.unattempted
                ? [
                    {
                      id: log.id,
                      teamId: log.teamId,
                      attemptCount: outcome.attempt,
                      errorMessage: outcome.message,
                    },
                  ]
                : [],
            ),
          );
          await settleJobs(tx, group);
        });
        for (const item of group) item.resolve(item.job ? SETTLED : undefined);
        return;
      } catch (error) {
        const refused = isRefusedData(error);
        if (refused && group.length > 1) {
          // One outcome the database refuses must not take the group's others with it: outcomes of
          // other emails, often of other teams (review finding, session 13: a team's SMTP server
          // answering with a NUL in its message id left every email of the group `queued` for
          // good, though delivered). Each is written alone; only the refused one fails.
          for (const item of group) await this.#write([item]);
          return;
        }
        const delay = refused ? undefined : RETRY_DELAYS_MS[attempt];
        if (delay !== undefined) {
          await new Promise((resolve) => setTimeout(resolve, delay));
          continue;
        }
        for (const item of group) {
          if (item.outcome.kind !== 'sent') {
            item.reject(error);
            continue;
          }
          console.error(
            `[email.send] ${item.log.id} was handed to the provider (${item.outcome.providerMessageId}) but its status could not be recorded:`,
            messageForLog(error),
          );
          item.resolve(undefined);
        }
        return;
      }
    }
  }

  /**
   * Records `group` in ONE statement outside a transaction when it can (issue #9: one round trip
   * instead of begin, status + history, the listener's query, the jobs' completion and commit):
   * every outcome is final (`sent` without refused recipients, or `failed`), every one has its
   * claimed job from a queue that gives its completion as SQL, and the status listener (webhook
   * outbox) has nothing to write for these teams and statuses — checked in that same statement
   * (transitionAtOnce), so a group it has work for is written by nothing and returns false.
   * @returns whether the group was recorded and its jobs completed.
   */
  async #writeInOneStatement(group: readonly Pending[]): Promise<boolean> {
    const now = Date.now();
    const teamIds = [...new Set(group.map((item) => item.log.teamId))];
    const settler = group[0]?.job?.settler;
    if (
      !settler ||
      teamIds.some((teamId) => (this.#listenedTeams.get(teamId) ?? 0) > now) ||
      group.some(
        ({ outcome, job }) =>
          job?.settler !== settler ||
          outcome.kind === 'retry' ||
          (outcome.kind === 'sent' && (outcome.refused?.length ?? 0) > 0),
      )
    )
      return false;
    const moves = group.flatMap((item) => {
      const event = statusEventOf(item.outcome);
      return event ? [{ email: item.log, event }] : [];
    });
    const onlyIf = statusChangeIdleCondition(teamIds, [...new Set(moves.map((move) => move.event.status))]);
    const complete =
      onlyIf &&
      settler.completionSql(
        group.map((item) => item.job!),
        onlyIf,
      );
    if (!onlyIf || !complete) return false;
    if (await transitionAtOnce(this.#db, moves, { complete, onlyIf })) return true;
    for (const teamId of teamIds) this.#listenedTeams.set(teamId, now + LISTENED_TEAM_MS);
    if (this.#listenedTeams.size > 10_000) this.#listenedTeams.clear();
    return false;
  }
}

/** Most characters of a provider's message id kept (RFC 5322 ids are far shorter; an index row has 8,191 bytes). */
const PROVIDER_MESSAGE_ID_MAX = 255;

/**
 * `outcome` with only what PostgreSQL stores and indexes: the provider's message id in printable
 * ASCII (RFC 5322 msg-id characters), at most {@link PROVIDER_MESSAGE_ID_MAX} characters, and no NUL
 * in its messages and diagnostics. All of them come from the provider, which for SMTP is any server
 * a team names (review finding, session 13: a NUL or a 12 KB id in the final reply made the
 * group's statement fail, for every team in the group).
 */
function storableOutcome(outcome: SendOutcome): SendOutcome {
  const text = (value: string) => value.replaceAll('\0', '');
  switch (outcome.kind) {
    case 'sent': {
      const providerMessageId = outcome.providerMessageId
        .replace(/[^\x21-\x7e]/g, '')
        .slice(0, PROVIDER_MESSAGE_ID_MAX);
      const refused = outcome.refused?.map((item) => ({
        ...item,
        address: text(item.address),
        diagnostic: text(item.diagnostic),
      }));
      return { ...outcome, providerMessageId, ...(refused ? { refused } : {}) };
    }
    case 'failed':
    case 'retry':
      return { ...outcome, message: text(outcome.message) };
  }
}

/**
 * Settles the jobs of `group` in `tx`: one `complete` for the finished ones (sent, failed), one
 * `fail` per distinct message for the retried ones (the message is the job's output).
 */
async function settleJobs(tx: Executor, group: readonly Pending[]): Promise<void> {
  const withJob = group.filter((item) => item.job);
  const settler = withJob[0]?.job?.settler;
  if (!settler) return;
  await settler.complete(
    tx,
    withJob.filter((item) => item.outcome.kind !== 'retry').map((item) => item.job!),
  );
  const retried = new Map<string, ClaimedJob<unknown>[]>();
  const givenBack = new Map<string, ClaimedJob<unknown>[]>();
  for (const { outcome, job } of withJob) {
    if (outcome.kind !== 'retry') continue;
    const byMessage = outcome.unattempted ? givenBack : retried;
    byMessage.set(outcome.message, [...(byMessage.get(outcome.message) ?? []), job!]);
  }
  for (const [message, jobs] of retried) await settler.fail(tx, jobs, message);
  for (const [message, jobs] of givenBack) await settler.giveBack(tx, jobs, message);
}

/** The status event an outcome records (a retry records none: the email stays `queued`). */
function statusEventOf(outcome: SendOutcome): StatusEvent | undefined {
  switch (outcome.kind) {
    case 'sent':
      return {
        status: 'sent',
        detail: {
          attempt: outcome.attempt,
          providerMessageId: outcome.providerMessageId,
          ...(outcome.refused?.length ? { refused: outcome.refused } : {}),
        },
        set: {
          providerMessageId: outcome.providerMessageId,
          attemptCount: outcome.attempt,
          errorMessage: null,
        },
      };
    case 'failed':
      return {
        status: 'failed',
        detail: { attempt: outcome.attempt, error: outcome.message, ...outcome.detail },
        set: { errorMessage: outcome.message, attemptCount: outcome.attempt },
      };
    case 'retry':
      return undefined;
  }
}
