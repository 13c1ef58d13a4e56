import type { Database, Executor } from '../../db/client.ts';
import { GroupCommit } from '../../db/group-commit.ts';
import { EMAIL_SEND_JOB, type JobPayload } from '../../jobs/definitions.ts';
import type { JobQueue } from '../../jobs/queue.ts';
import { emailRepository, type NewEmailLog } from './emails.repository.ts';
import { type SendFieldRows, writeSendFields } from './send-fields.ts';
import { notifyStatusChange } from './status-listeners.ts';

/** What an accepted send writes: its log, its first status event (`queued`) and its `email.send` job. */
export interface AcceptedEmailRows {
  /** The log row; `createdAt` is left to the database (the batch transaction's `now()`). */
  log: NewEmailLog;
  /** Kept in the first status event (e.g. `{resendOf}`); `{}` when there is nothing to say. */
  eventDetail: Record<string, unknown>;
  /** The job's UUID (see ids.newJobId) and payload; `startAfter` for a scheduled send (issue #10). */
  job: { id: string; data: JobPayload<'email.send'>; startAfter?: Date | undefined };
  /** The issue #10 send fields to store with the log (send-fields.ts), when the send has any. */
  fields?: SendFieldRows | undefined;
}

/**
 * How long pg-boss keeps a job that has not started (its default, 14 days, is shorter than the
 * 30 days a send may be scheduled ahead): 31 days.
 */
const SCHEDULED_JOB_RETENTION_SECONDS = 31 * 24 * 60 * 60;

/**
 * Batch shape of the accept path (issue #9): a batch starts as soon as a transaction slot is free
 * (no timer delay: a lone request is not slowed), otherwise when a running one commits, carrying
 * whatever arrived meanwhile, up to MAX_BATCH. Two transactions in flight let one batch form while
 * the other commits. On the shared 2-core machine, 1, 2 or 4 in flight and a 1 ms window measured
 * the same within its noise (`npm run bench:send`); at 50 connections batches carried ~14 sends.
 */
const MAX_BATCH = 128;
const WINDOW_MS = 0;
const MAX_IN_FLIGHT = 2;

/**
 * How long pg-boss keeps a completed `email.send` job (its default is 7 days): the log and its
 * events are the record that lasts.
 */
const COMPLETED_JOB_RETENTION_SECONDS = 24 * 60 * 60;

/**
 * Writes a batch: ONE multi-row insert each for logs, send fields (when any), events and jobs,
 * logs first (the others reference them). Any failing row fails the statement, and GroupCommit then isolates the item.
 */
async function writeAccepted(queue: JobQueue, tx: Executor, items: AcceptedEmailRows[]): Promise<void> {
  await emailRepository.insertLogs(
    tx,
    items.map((item) => item.log),
  );
  // Issue #10 send fields and attachments (send-fields.ts), after the logs they reference.
  await writeSendFields(
    tx,
    items.map((item) => item.fields),
  );
  await emailRepository.insertEvents(
    tx,
    items.map((item) => ({
      teamId: item.log.teamId,
      emailId: item.log.id,
      status: 'queued' as const,
      detail: item.eventDetail,
    })),
  );
  const now = Date.now();
  await queue.enqueueMany(
    tx,
    EMAIL_SEND_JOB,
    items.map(({ job }) => ({
      id: job.id,
      data: job.data,
      deleteAfterSeconds: COMPLETED_JOB_RETENTION_SECONDS,
      // A time already past starts the job now, like no time: pg-boss keeps a job that has not
      // run until its start plus its retention, so a scheduledAt of 1970 handed on as startAfter
      // made its maintenance delete the job before it ever ran, leaving the email queued for good
      // (review finding, session 15).
      ...(job.startAfter && job.startAfter.getTime() > now
        ? { startAfter: job.startAfter, retentionSeconds: SCHEDULED_JOB_RETENTION_SECONDS }
        : {}),
    })),
  );
  await notifyStatusChange(
    tx,
    items.map((item) => item.log),
  );
}

/** Group commit of accepted sends over one database (see {@link GroupCommit}). */
export type AcceptBatcher = GroupCommit<AcceptedEmailRows>;

/**
 * A new accept batcher over `deps.db`, writing its jobs through `deps.queue`. The context
 * (server/src/context.ts) makes one per process, so every send through it shares transactions.
 * `submit(rows)` resolves once the rows are committed and rejects with that item's own error (a
 * constraint it violates, …); `drain()` waits for what it holds (before the database closes).
 */
export function createAcceptBatcher(deps: { db: Database; queue: JobQueue }): AcceptBatcher {
  return new GroupCommit<AcceptedEmailRows>(deps.db, {
    write: (tx, items) => writeAccepted(deps.queue, tx, items),
    maxBatch: MAX_BATCH,
    windowMs: WINDOW_MS,
    maxInFlight: MAX_IN_FLIGHT,
  });
}
