import { sql } from 'drizzle-orm';
import type { Database, Executor } from '../../db/client.ts';
import { GroupCommit } from '../../db/group-commit.ts';
import { newJobId } from '../../ids.ts';
import { type JobPayload, WEBHOOK_DELIVER_JOB } from '../../jobs/definitions.ts';
import type { JobQueue } from '../../jobs/queue.ts';
import type { AttemptOutcome } from './webhook-attempt.ts';
import { type WebhookAttemptSummary, webhookRepository } from './webhooks.repository.ts';

/** A webhook failing for this long without a success is disabled (issue #11: 5 days). */
export const DISABLE_AFTER_FAILING_MS = 5 * 24 * 60 * 60 * 1000;

/** An attempt to record, and the attempt to schedule after it if it failed and the webhook lives. */
export interface RecordedAttempt {
  outcome: AttemptOutcome;
  /** The next attempt's job payload and its delay (seconds), when there is one. */
  next?: { data: JobPayload<'webhook.deliver'>; delaySeconds: number } | undefined;
}

/**
 * How long pg-boss keeps a completed `webhook.deliver` job: the delivery record is what lasts.
 */
export const COMPLETED_JOB_RETENTION_SECONDS = 24 * 60 * 60;

/**
 * Records delivery attempts through a group commit (issue #11; the pattern of issue #9's send
 * recorder): attempts finishing together share one transaction with one insert of their delivery
 * records, one update of their webhooks (failure counters, `lastTriggeredAt`, `lastSuccessAt`, the
 * 410 and 5-day disabling) and one insert of the retry jobs, for webhooks still active after it.
 */
export class WebhookAttemptRecorder {
  readonly #commit: GroupCommit<RecordedAttempt>;

  constructor(db: Database, queue: JobQueue) {
    this.#commit = new GroupCommit<RecordedAttempt>(db, {
      write: (tx, items) => writeAttempts(queue, tx, items),
      maxBatch: 200,
      windowMs: 0,
      maxInFlight: 2,
    });
  }

  /** Resolves once `attempt` is committed; rejects with its own error. */
  record(attempt: RecordedAttempt): Promise<void> {
    return this.#commit.submit(attempt);
  }
}

/** Writes attempts in `tx`; exported for the synchronous test and redeliver endpoints. */
export async function writeAttempts(
  queue: JobQueue | undefined,
  tx: Executor,
  items: readonly RecordedAttempt[],
): Promise<void> {
  // No wait for this commit's WAL flush: each attempt's job is completed after this commits, by a
  // durable (synchronous) commit that flushes this one's WAL too. A database crash before that
  // loses both the record and the completion, and the queue makes the attempt again: the receiver
  // may get it twice, which it must tolerate anyway (spec "Events"), but none is lost.
  await tx.execute(sql`set local synchronous_commit = off`);
  await webhookRepository.insertDeliveries(
    tx,
    items.map((item) => item.outcome.delivery),
  );
  const now = new Date();
  const active = await webhookRepository.applyAttempts(
    tx,
    summarize(items),
    new Date(now.getTime() - DISABLE_AFTER_FAILING_MS),
  );
  const retries = items.flatMap((item) =>
    item.next && active.get(item.next.data.webhookId)
      ? [
          {
            id: newJobId().uuid,
            data: item.next.data,
            startAfter: new Date(now.getTime() + item.next.delaySeconds * 1000).toISOString(),
            deleteAfterSeconds: COMPLETED_JOB_RETENTION_SECONDS,
          },
        ]
      : [],
  );
  if (retries.length > 0) {
    if (!queue) throw new Error('writeAttempts: a retry needs the job queue');
    await queue.enqueueMany(tx, WEBHOOK_DELIVER_JOB, retries);
  }
}

/** Folds attempts per webhook, in order (see {@link WebhookAttemptSummary}). */
function summarize(items: readonly RecordedAttempt[]): WebhookAttemptSummary[] {
  const byWebhook = new Map<string, WebhookAttemptSummary>();
  for (const { outcome } of items) {
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
      };
      byWebhook.set(delivery.webhookId, summary);
    }
    if (at > summary.lastTriggeredAt) summary.lastTriggeredAt = at;
    if (result.success) {
      summary.lastSuccessAt = at;
      summary.failuresAfter = 0;
      summary.firstFailureAt = null;
    } else {
      summary.failuresAfter += 1;
      summary.firstFailureAt ??= at;
      if (result.responseStatus === 410) summary.gone = true;
    }
  }
  return [...byWebhook.values()];
}
