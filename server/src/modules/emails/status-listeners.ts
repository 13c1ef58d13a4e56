import type { Executor } from '../../db/client.ts';
import { ALWAYS, type StatementPart } from '../../db/named-statement.ts';
import type { EmailStatus } from './email-status.ts';

/**
 * An email whose status just moved (or, on the accept path, was created `queued`), as its log row
 * reads after the move. Rows carry every column the writer has (the moved rows are full rows), so
 * a listener may read more than these (e.g. `metadata`, `tags` once the log has them).
 */
export interface StatusChangedEmail {
  id: string;
  teamId: string;
  templateId?: string | null | undefined;
  toAddresses: string[];
  subject: string;
  status: EmailStatus;
  errorMessage?: string | null | undefined;
  /** When the status moved (the moved rows' `updatedAt`); absent on the accept path (now). */
  updatedAt?: Date | undefined;
  /** The recipients the event that moved it concerns, when it named some (issue #11). */
  recipients?: readonly string[] | undefined;
}

/**
 * Called inside the transaction that changes the statuses (an outbox: whatever it writes commits or
 * rolls back with them). It must not commit anything on its own.
 */
export type StatusChangeListener = ((
  tx: Executor,
  emails: readonly StatusChangedEmail[],
) => Promise<void>) & {
  /**
   * Optional: an SQL condition that is true exactly when moving emails of `teamIds` to `statuses`
   * would make the listener write nothing (e.g. no webhook subscribed), as a statement part built
   * once (StatementPart). A writer may then record the moves in one statement outside a
   * transaction, every part of it conditional on this condition, and not call the listener — the
   * condition and the moves read one snapshot, as the listener's own query in the writer's
   * transaction would.
   */
  idleWhen?: (teamIds: readonly string[], statuses: readonly EmailStatus[]) => StatementPart;
};

let listener: StatusChangeListener | undefined;

/**
 * Registers the one listener of status changes (issue #11: webhook fan-out), replacing any earlier
 * one. The composition root calls it (job-handlers.ts), so the emails module never imports the
 * module that listens (issue #9 "Dependencies point one way"). One per process: the last
 * registration wins.
 */
export function onStatusChange(next: StatusChangeListener | undefined): void {
  listener = next;
}

/**
 * Hands `emails` (rows whose status moved in `tx`) to the registered listener, in `tx`; no-op when
 * nothing moved or nothing listens. Errors propagate, so the status change fails with its outbox.
 */
export async function notifyStatusChange(tx: Executor, emails: readonly StatusChangedEmail[]): Promise<void> {
  if (listener && emails.length > 0) await listener(tx, emails);
}

/**
 * The condition under which moving emails of `teamIds` to `statuses` leaves the registered listener
 * nothing to write (see StatusChangeListener.idleWhen): `true` when nothing listens; undefined when
 * the listener cannot tell, so the writer must run it inside its transaction.
 */
export function statusChangeIdleCondition(
  teamIds: readonly string[],
  statuses: readonly EmailStatus[],
): StatementPart | undefined {
  if (!listener) return ALWAYS;
  return listener.idleWhen?.(teamIds, statuses);
}
