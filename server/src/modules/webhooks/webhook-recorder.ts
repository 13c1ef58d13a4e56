import type { SQL } from 'drizzle-orm';
import type { Database, Executor } from '../../db/client.ts';
import { GroupCommit } from '../../db/group-commit.ts';
import { newJobId } from '../../ids.ts';
import { type JobPayload, WEBHOOK_DELIVER_JOB } from '../../jobs/definitions.ts';
import { type ClaimedJob, JobQueue, SETTLED } from '../../jobs/queue.ts';
import type { AttemptOutcome } from './webhook-attempt.ts';
import { type HandedJob, type WebhookAttemptSummary, webhookRepository } from './webhooks.repository.ts';

/** A webhook failing for this long without a success is disabled (issue #11: 5 days). */
export const DISABLE_AFTER_FAILING_MS = 5 * 24 * 60 * 60 * 1000;

/**
 * An attempt to record, the attempt to schedule after it if it failed and the webhook lives, and
 * the claimed job it came from, completed in the same transaction. No `outcome` = the job is only
 * completed (its webhook was deleted or disabled: no request was made).
 */
export interface RecordedAttempt {
  outcome?: AttemptOutcome | undefined;
  /** The next attempt's job payload and its delay (seconds), when there is one. */
  next?: { data: JobPayload<'webhook.deliver'>; delaySeconds: number } | undefined;
  /** The claimed `webhook.deliver` job of this attempt, completed with its record (see ClaimLoop). */
  job?: ClaimedJob<unknown> | undefined;
}

/**
 * How long pg-boss keeps a completed `webhook.deliver` job: the delivery record is what lasts.
 */
export const COMPLETED_JOB_RETENTION_SECONDS = 24 * 60 * 60;

/**
 * Records delivery attempts through a group commit (issue #11; the pattern of issue #9's send
 * recorder): attempts finishing together share one transaction with one insert of their delivery
 * records, one update of their webhooks (failure counters, `lastTriggeredAt`, `lastSuccessAt`, the
 * 410 and 5-day disabling), one insert of the retry jobs, for webhooks still active after it, and
 * one `complete` of their claimed jobs (JobSettler): an attempt costs no commit of its own. A group
 * without retries to schedule (the usual one: every attempt succeeded, or failed for good) is ONE
 * statement instead, no transaction around it: records, webhooks, the jobs' completion
 * (JobQueue.completionStatement) and the hand-off of as many waiting jobs of the same webhooks in
 * their place (JobQueue.handoffStatement, given to `onHanded`) in one round trip, not four (begin,
 * complete, record, commit) plus a fetch — the time an attempt's slot of the webhook's cap stands
 * empty. One group is written at a time: two at once contended for the same first waiting jobs
 * and rows (issue #11 bench, alternating runs: 0.40–0.42× raw with two, 0.49–0.58× with one;
 * PostgreSQL's CPU per delivery 100–110 µs against 70–78).
 */
export class WebhookAttemptRecorder {
  readonly #commit: GroupCommit<RecordedAttempt>;

  /**
   * @param onHanded runs the jobs a group's statement claimed in its completed jobs' place (the
   *   hand-off, JobQueue.handoffStatement), once it committed; default: `queue.adopt` them.
   */
  constructor(
    db: Database,
    queue: JobQueue,
    onHanded: (jobs: HandedJob[]) => void = (jobs) => queue.adopt(WEBHOOK_DELIVER_JOB, jobs),
  ) {
    this.#commit = new GroupCommit<RecordedAttempt>(db, {
      write: async (tx, items) => {
        await writeAttempts(queue, tx, items);
      },
      writeBatch: (db, items) => writeAttemptsAlone(db, queue, items, onHanded),
      maxBatch: 200,
      windowMs: 0,
      maxInFlight: 1,
    });
  }

  /**
   * Resolves once `attempt` is committed — with SETTLED when its `job` was completed in that
   * transaction (the claim loop then has nothing left to do for it); rejects with its own error
   * (nothing of it committed: the job is still the loop's to fail, and the queue retries it).
   */
  async record(attempt: RecordedAttempt): Promise<undefined | typeof SETTLED> {
    await this.#commit.submit(attempt);
    return attempt.job ? SETTLED : undefined;
  }
}

/**
 * Writes a group of attempts on `db`: with no retry to schedule, as one statement that also
 * completes their jobs (atomic on its own); otherwise, or when the queue cannot name the jobs'
 * table, in a transaction ({@link writeAttempts}).
 */
async function writeAttemptsAlone(
  db: Database,
  queue: JobQueue,
  items: readonly RecordedAttempt[],
  onHanded: (jobs: HandedJob[]) => void,
): Promise<void> {
  const jobs = items.flatMap((item) => (item.job ? [item.job] : []));
  const statements = jobs.length > 0 ? statementsOf(queue) : undefined;
  if (items.some((item) => item.next) || (jobs.length > 0 && !statements)) {
    await db.transaction((tx) => writeAttempts(queue, tx, items));
    return;
  }
  const handed = await writeAttempts(
    queue,
    db,
    items,
    statements && {
      sql: statements.complete,
      handoff: statements.handoff,
      values: {
        ...JobQueue.completionValues(jobs),
        ...queue.handoffValues(
          WEBHOOK_DELIVER_JOB,
          jobs,
          (job) => (job.data as JobPayload<'webhook.deliver'>).webhookId,
        ),
      },
    },
  );
  // Committed: the jobs claimed in the completed jobs' place run in this process's loop.
  if (handed.length > 0) onHanded(handed);
}

/**
 * Each queue's completion and hand-off statements of `webhook.deliver` jobs
 * (JobQueue.completionStatement, JobQueue.handoffStatement), once known.
 */
const queueStatements = new WeakMap<JobQueue, { complete: SQL; handoff: SQL }>();

/** `queue`'s completion and hand-off of `webhook.deliver` jobs, built once (undefined until they can be). */
function statementsOf(queue: JobQueue): { complete: SQL; handoff: SQL } | undefined {
  let statements = queueStatements.get(queue);
  if (!statements) {
    const complete = queue.completionStatement(WEBHOOK_DELIVER_JOB);
    const handoff = queue.handoffStatement(WEBHOOK_DELIVER_JOB);
    if (!complete || !handoff) return undefined;
    statements = { complete, handoff };
    queueStatements.set(queue, statements);
  }
  return statements;
}

/**
 * Writes attempts in `tx`; exported for the synchronous test and redeliver endpoints. With
 * `complete` (JobQueue.completionStatement and its values for the items' jobs; `tx` must then be the
 * database itself, not a transaction) the jobs are completed by the records'
 * statement instead of the settler's own.
 */
export async function writeAttempts(
  queue: JobQueue | undefined,
  tx: Executor,
  items: readonly RecordedAttempt[],
  complete?: { sql: SQL; handoff?: SQL; values: Record<string, unknown> },
): Promise<HandedJob[]> {
  const attempts = items.flatMap((item) => (item.outcome ? [{ ...item, outcome: item.outcome }] : []));
  const jobs = items.flatMap((item) => (item.job ? [item.job] : []));
  if (jobs.length > 0 && !complete) await jobs[0]!.settler.complete(tx, jobs);
  // One statement for the records and the webhooks' rows, last: every group of one busy webhook
  // updates its row, so its lock is held from here to the commit only (two groups in flight would
  // otherwise take turns for the whole transaction).
  // No wait for this commit's WAL flush (asyncCommit): the records, the retry jobs and the
  // completion of the attempts' jobs commit together, so a database crash that loses this commit
  // loses all of them: the jobs are still active, their heartbeat lapses and the queue makes the
  // attempts again. The receiver may get one twice, which it must tolerate anyway (spec
  // "Events"), but none is lost.
  const now = new Date();
  const { active, handed } = await webhookRepository.recordAttempts(
    tx,
    attempts.map((item) => ({ ...item.outcome.delivery, payloadJson: item.outcome.body })),
    summarize(attempts),
    new Date(now.getTime() - DISABLE_AFTER_FAILING_MS),
    {
      asyncCommit: true,
      complete: complete?.sql,
      handoff: complete?.handoff,
      completeValues: complete?.values,
    },
  );
  const retries = attempts.flatMap((item) =>
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
  return handed;
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
