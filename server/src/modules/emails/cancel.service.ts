import type { Database } from '../../db/client.ts';
import { AppError } from '../../http/errors.ts';
import { uuidOfJobId } from '../../ids.ts';
import { EMAIL_SEND_JOB } from '../../jobs/definitions.ts';
import type { JobQueue } from '../../jobs/queue.ts';
import { transition } from './emails.status.service.ts';
import { getLog } from './logs.service.ts';

/** The errorMessage of a cancelled email (issue #10). */
export const CANCELLED_MESSAGE = 'cancelled';

/**
 * `POST /api/v1/:id/cancel` (issue #10): a still-`queued` email whose send job has not started
 * (typically a scheduled one) moves to `failed` with errorMessage "cancelled", and its job is
 * cancelled in the same transaction (JobQueue.cancelIfWaiting), so it never reaches a provider. An
 * email a worker has already claimed is refused, not reported cancelled: the worker checked it
 * was queued before handing it to its provider, and the provider's answer could no longer be
 * recorded against a failed email.
 * Returns {id, status: "failed"}.
 * @throws NOT_FOUND (not the team's email); VALIDATION_ERROR (400, details.reason NOT_CANCELLABLE)
 *   when the email is no longer queued (details.status: its status, also when its send ended
 *   while this ran), or its send is in progress (details.status "sending") or over while its
 *   status could not be recorded (details.status "processed": its job completed, failed or is
 *   gone and the email is still `queued`).
 */
export async function cancelEmail(
  deps: { db: Database; queue: JobQueue },
  teamId: string,
  emailId: string,
): Promise<{ id: string; status: 'failed' }> {
  const { db } = deps;
  const log = await getLog(db, teamId, emailId);
  const notCancellable = (status: string) =>
    new AppError('VALIDATION_ERROR', `Only queued emails can be cancelled (this one is ${status})`, {
      reason: 'NOT_CANCELLABLE',
      status,
    });
  if (log.status !== 'queued') throw notCancellable(log.status);
  const jobUuid = uuidOfJobId(log.jobId);
  const moved = await db.transaction(async (tx) => {
    const job = jobUuid ? await deps.queue.cancelIfWaiting(tx, EMAIL_SEND_JOB, jobUuid) : 'cancelled';
    // Cancelled now (or the email never had a job). A job completed or failed while the log still
    // says queued was handed to a provider whose answer was not recorded (review finding, session
    // 13: such an email was reported cancelled though delivered); so was one whose row is gone: a
    // job that has not run is kept until it does (accept-batcher.ts), a completed one only 24 h
    // (review finding, session 15: after those 24 h cancel reported the delivered email cancelled).
    if (job === 'active') throw notCancellable('sending');
    if (job !== 'cancelled') {
      // The job may have completed since the log was read, its outcome committed with it: answer
      // the status it recorded (review finding, time 2: a just-sent email was called "processed").
      const now = await getLog(tx, teamId, emailId);
      throw notCancellable(now.status === 'queued' ? 'processed' : now.status);
    }
    return transition(tx, log, {
      status: 'failed',
      detail: { error: CANCELLED_MESSAGE, cancelled: true },
      set: { errorMessage: CANCELLED_MESSAGE },
    });
  });
  if (!moved) throw notCancellable((await getLog(db, teamId, emailId)).status);
  return { id: log.id, status: 'failed' };
}
