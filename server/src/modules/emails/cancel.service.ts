import type { Database } from '../../db/client.ts';
import { AppError } from '../../http/errors.ts';
import { transition } from './emails.status.service.ts';
import { getLog } from './logs.service.ts';

/** The errorMessage of a cancelled email (issue #10). */
export const CANCELLED_MESSAGE = 'cancelled';

/**
 * `POST /api/v1/:id/cancel` (issue #10): a still-`queued` email (typically a scheduled one) moves to
 * `failed` with errorMessage "cancelled". Its job may still run; the worker leaves an email that is
 * no longer `queued` alone, so a cancelled email is never handed to a provider. An email whose send
 * is already in progress cannot be called back: cancel it before its `scheduledAt`.
 * Returns {id, status: "failed"}.
 * @throws NOT_FOUND (not the team's email); VALIDATION_ERROR (400, details.reason NOT_CANCELLABLE)
 *   when the email is no longer queued.
 */
export async function cancelEmail(
  db: Database,
  teamId: string,
  emailId: string,
): Promise<{ id: string; status: 'failed' }> {
  const log = await getLog(db, teamId, emailId);
  const notCancellable = (status: string) =>
    new AppError('VALIDATION_ERROR', `Only queued emails can be cancelled (this one is ${status})`, {
      reason: 'NOT_CANCELLABLE',
      status,
    });
  if (log.status !== 'queued') throw notCancellable(log.status);
  const moved = await db.transaction((tx) =>
    transition(tx, log, {
      status: 'failed',
      detail: { error: CANCELLED_MESSAGE, cancelled: true },
      set: { errorMessage: CANCELLED_MESSAGE },
    }),
  );
  if (!moved) throw notCancellable((await getLog(db, teamId, emailId)).status);
  return { id: log.id, status: 'failed' };
}
