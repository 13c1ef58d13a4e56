import type { Database, Executor } from '../../db/client.ts';
import { GroupCommit } from '../../db/group-commit.ts';
import type { AttemptOutcome } from './webhook-attempt.ts';
import {
  type ClaimedAttempt,
  type OutboxClaim,
  type WebhookAttemptSummary,
  webhookRepository,
} from './webhooks.repository.ts';

/** A webhook failing for this long without a success is disabled (issue #11: 5 days). */
export const DISABLE_AFTER_FAILING_MS = 5 * 24 * 60 * 60 * 1000;

/**
 * An attempt to record: its outcome (none: no request was made, the webhook is gone or disabled),
 * the outbox row it came from (none for the test and redeliver endpoints), and, when it failed and
 * the message has attempts left, the next attempt's number and delay (the row is then rescheduled,
 * else deleted).
 */
export interface RecordedAttempt {
  outcome?: AttemptOutcome | undefined;
  row?: ClaimedAttempt | undefined;
  next?: { attempt: number; delaySeconds: number } | undefined;
}

/**
 * The recorder's group-commit delay (GroupCommitOptions.fill): after a group's statement, the next
 * waits up to `waitMs` for `items` attempts. The statement's fixed cost (its plan's start-up, the
 * bind, the claim's index walk, the commit) was spread over ~40 attempts at 5,000-6,000 a second;
 * waiting lets groups grow. bench:webhooks, the tree before alternated with this one (session 23):
 * the worker's PostgreSQL spent 54-74 µs of CPU per delivery without it, 38-53 µs with it, and
 * the CPU ratio to the raw loop (receivers included) went from 0.50-0.57 to 0.58-0.67. An attempt's
 * request never waits for it (only its record and the claim of its replacement, which the rows
 * claimed ahead cover); a lone attempt is still written at once.
 */
export const RECORDING_FILL = { items: 200, waitMs: 10 } as const;

/**
 * Records delivery attempts through a group commit (issue #11; the pattern of issue #9's send
 * recorder): attempts finishing together are ONE statement ({@link webhookRepository.recordAttempts}):
 * their delivery records, their webhooks' counters (`lastTriggeredAt`, `lastSuccessAt`, failures,
 * the 410 and 5-day disabling), their outbox rows deleted or rescheduled, and the claim of as many
 * due rows in their place (the hand-off: `claimFor` sizes it, `onClaimed` gets what it claimed once
 * committed) — one round trip, no transaction around it, where a fetch would come a round trip
 * later. One group is written at a time: two at once contended for the same first due rows and the
 * same webhook rows (issue #11 bench, alternating runs: 0.40–0.42× raw with two, 0.49–0.58× with
 * one). When the statement fails, the group's attempts are written again one at a time in a
 * transaction's savepoints (GroupCommit), without a claim: one that cannot be written fails alone.
 */
export class WebhookAttemptRecorder {
  readonly #commit: GroupCommit<RecordedAttempt>;

  /**
   * @param claimFor the hand-off claim for a group of attempts about to be written (undefined: none).
   * @param onClaimed runs the rows a group's statement claimed, once it committed.
   */
  constructor(
    db: Database,
    claimFor: (items: readonly RecordedAttempt[]) => OutboxClaim | undefined,
    onClaimed: (rows: ClaimedAttempt[]) => void,
  ) {
    this.#commit = new GroupCommit<RecordedAttempt>(db, {
      write: async (tx, items) => {
        await writeAttempts(tx, items);
      },
      writeBatch: async (db, items) => {
        const claimed = await writeAttempts(db, items, claimFor(items));
        if (claimed.length > 0) onClaimed(claimed);
      },
      maxBatch: 200,
      windowMs: 0,
      maxInFlight: 1,
      fill: RECORDING_FILL,
    });
  }

  /**
   * Resolves once `attempt` is committed; rejects with its own error (nothing of it committed: its
   * outbox row stays claimed until its lease ends, then it is attempted again).
   */
  record(attempt: RecordedAttempt): Promise<void> {
    return this.#commit.submit(attempt);
  }
}

/**
 * Writes attempts on `db` (the database, or a transaction: the test and redeliver endpoints, the
 * group commit's fallback) with ONE statement, asynchronous commit included: the records, the
 * outbox rows' deletion or rescheduling and the claim commit together, so a database crash that
 * loses this commit loses all of them — the rows are still claimed, their lease lapses and the
 * attempts are made again. The receiver may get one twice, which it must tolerate anyway (spec
 * "Events"), but none is lost.
 * @returns the outbox rows `claim` claimed (none without one).
 */
export async function writeAttempts(
  db: Executor,
  items: readonly RecordedAttempt[],
  claim?: OutboxClaim,
): Promise<ClaimedAttempt[]> {
  const attempts = items.flatMap((item) => (item.outcome ? [{ ...item, outcome: item.outcome }] : []));
  const finished: { id: string; claims: number }[] = [];
  const retries: { id: string; claims: number; attempt: number; delaySeconds: number }[] = [];
  for (const { row, next } of items) {
    if (!row) continue;
    if (next) retries.push({ id: row.id, claims: row.claims, ...next });
    else finished.push({ id: row.id, claims: row.claims });
  }
  const withRows = finished.length > 0 || retries.length > 0 || claim !== undefined;
  return webhookRepository.recordAttempts(
    db,
    attempts.map(({ outcome, row }) =>
      row ? { ...outcome.delivery, outboxId: row.id } : { ...outcome.delivery, payloadJson: outcome.body },
    ),
    summarize(attempts),
    new Date(Date.now() - DISABLE_AFTER_FAILING_MS),
    { asyncCommit: true, outbox: withRows ? { finished, retries, claim } : undefined },
  );
}

/**
 * Folds attempts per webhook, in order (see {@link WebhookAttemptSummary}); a failed attempt
 * without `next` is its message's last (schedule exhausted, 410, or a test or redelivery).
 */
function summarize(
  items: readonly { outcome: AttemptOutcome; next?: RecordedAttempt['next'] }[],
): WebhookAttemptSummary[] {
  const byWebhook = new Map<string, WebhookAttemptSummary>();
  for (const { outcome, next } of items) {
    const { delivery, result } = outcome;
    const at = delivery.createdAt;
    let summary = byWebhook.get(delivery.webhookId);
    if (!summary) {
      summary = {
        webhookId: delivery.webhookId,
        lastTriggeredAt: at,
        lastSuccessAt: null,
        failuresAfter: 0,
        firstFailureAt: null,
        gone: false,
        failed: false,
        finalFailure: false,
      };
      byWebhook.set(delivery.webhookId, summary);
    }
    if (at > summary.lastTriggeredAt) summary.lastTriggeredAt = at;
    if (result.success) {
      summary.lastSuccessAt = at;
      summary.failuresAfter = 0;
      summary.firstFailureAt = null;
      summary.finalFailure = false;
    } else {
      summary.failuresAfter += 1;
      summary.failed = true;
      if (!next) summary.finalFailure = true;
      summary.firstFailureAt ??= at;
      if (result.responseStatus === 410) summary.gone = true;
    }
  }
  return [...byWebhook.values()];
}
