import type { Executor } from '../../db/client.ts';
import type { StatementPart } from '../../db/named-statement.ts';
import { newId } from '../../ids.ts';
import { type EmailStatus, statusesBefore, statusesPast } from './email-status.ts';
import { type EmailLogRow, emailRepository, type TransitionRow } from './emails.repository.ts';
import { notifyStatusChange } from './status-listeners.ts';

/** The email a status event is about. */
export interface EmailRef {
  id: string;
  teamId: string;
}

/** Something that happened to an email: a new status, when, and what to keep with it. */
export interface StatusEvent {
  status: EmailStatus;
  /** When it happened (default: now); becomes the status's timestamp if the status moves. */
  at?: Date;
  /** Kept in the email's history with the event (e.g. attempt, error, providerMessageId). */
  detail?: Record<string, unknown>;
  /** Log fields written with the move (not written when the status does not move). */
  set?: Partial<Pick<EmailLogRow, 'providerMessageId' | 'errorMessage' | 'attemptCount'>>;
  /**
   * Kept in the history only, never moves `status` (issue #11: a soft bounce or a deferral is news
   * about the email, not its end).
   */
  historyOnly?: boolean;
  /**
   * The recipients (bare addresses) the event concerns, when it names some (issue #11 outcomes per
   * recipient): handed to the status listener with the moved row (webhook `data.recipients`).
   */
  recipients?: readonly string[];
}

/** What one event did: the email's row after the move, or undefined when its status stayed. */
export type TransitionResult = EmailLogRow | undefined;

/**
 * THE one writer of email status (ARCHITECTURE.md "Email status state machine"): for each event it
 * appends a history row, always; then moves `status` only when the state machine allows it from the
 * email's status as it is in the database now (checked under the row lock, so two writers racing
 * cannot move an email backwards); sets the status's timestamp only if it is still empty (each
 * transition sets its timestamp once); and writes the event's `set` fields with the move.
 * A late or repeated event (`delivered` after `opened`) does not move the status; a late step of
 * the delivery path still sets its own timestamp if empty (`deliveredAt`, see statusesPast).
 * Works on many emails in a constant number of statements (the batched worker records a whole
 * group of outcomes in one transaction); several events for one email are applied in order.
 * Run it inside the caller's transaction (`tx`), so history and status commit together.
 * Returns one result per event, in order.
 * The moved rows go to the registered status listener in `tx` (webhook outbox, issue #11).
 */
export async function transitionMany(
  tx: Executor,
  events: readonly { email: EmailRef; event: StatusEvent }[],
): Promise<TransitionResult[]> {
  const now = new Date();
  const history = events.map(({ email, event }) => ({
    teamId: email.teamId,
    emailId: email.id,
    status: event.status,
    detail: event.detail ?? {},
    occurredAt: event.at ?? now,
  }));
  const results: TransitionResult[] = new Array(events.length).fill(undefined);
  const moves = rounds(events);
  // The history rows go with the first round's status moves, in one statement.
  if (moves.length === 0) await emailRepository.insertEvents(tx, history);
  for (const [n, round] of moves.entries()) {
    const moved = await emailRepository.applyTransitions(
      tx,
      round.map((index) => toTransitionRow(events[index]!, now)),
      n === 0 ? history : [],
    );
    await notifyStatusChange(tx, withRecipients(moved, round, events));
    const byId = new Map(moved.map((row) => [row.id, row]));
    for (const index of round) results[index] = byId.get(events[index]!.email.id);
  }
  await emailRepository.fillLateTimestamps(
    tx,
    lateSteps(
      events,
      results.map((row) => row !== undefined),
      now,
    ),
  );
  return results;
}

/**
 * {@link transitionMany} in ONE statement, outside any transaction (issue #9: the worker records a
 * group of delivery outcomes in one round trip instead of five), for events of distinct emails,
 * with `options.complete` (a data-modifying `update … returning id`, e.g. the completion of the
 * jobs that produced the events, gated by the same condition) in that statement. Every part of the
 * statement is conditional on `options.onlyIf`, which must be true exactly when the status listener
 * has nothing to write for these moves (statusChangeIdleCondition): the listener is not called.
 * A late step (an email already past the event's status) fills its timestamp in a second statement.
 * Returns, per event, whether it moved its email's status; or undefined when `onlyIf` was false —
 * then nothing was written and the caller records the events the usual way, in a transaction.
 * @throws Error when two events name one email (use transitionMany).
 */
export async function transitionAtOnce(
  db: Executor,
  events: readonly { email: EmailRef; event: StatusEvent }[],
  options: { complete: StatementPart; onlyIf: StatementPart },
): Promise<boolean[] | undefined> {
  const now = new Date();
  const moves = rounds(events);
  if (moves.length > 1) throw new Error('transitionAtOnce: one event per email');
  const history = events.map(({ email, event }) => ({
    id: newId('emailEvent'),
    teamId: email.teamId,
    emailId: email.id,
    status: event.status,
    detail: event.detail ?? {},
    occurredAt: event.at ?? now,
  }));
  const moved = new Set(
    await emailRepository.applyTransitionsReturningIds(
      db,
      (moves[0] ?? []).map((index) => toTransitionRow(events[index]!, now)),
      history,
      options,
    ),
  );
  // Nothing moved: either `onlyIf` was false, or no email was still where its event moves from —
  // the history rows tell which (they are written whenever the condition held).
  if (
    moved.size === 0 &&
    !(await emailRepository.eventsExist(
      db,
      history.map((row) => row.id),
    ))
  )
    return undefined;
  const results = events.map(({ email, event }) => !event.historyOnly && moved.has(email.id));
  await emailRepository.fillLateTimestamps(db, lateSteps(events, results, now));
  return results;
}

/** {@link transitionMany} for one event. Returns the moved row, or undefined (history only). */
export async function transition(
  tx: Executor,
  email: EmailRef,
  event: StatusEvent,
): Promise<TransitionResult> {
  const [result] = await transitionMany(tx, [{ email, event }]);
  return result;
}

/** `moved` with each row's event `recipients` attached, when an event of the round names some. */
function withRecipients(
  moved: EmailLogRow[],
  round: readonly number[],
  events: readonly { email: EmailRef; event: StatusEvent }[],
): EmailLogRow[] {
  const named = new Map<string, readonly string[]>();
  for (const index of round) {
    const { email, event } = events[index]!;
    if (event.recipients?.length) named.set(email.id, event.recipients);
  }
  if (named.size === 0) return moved;
  return moved.map((row) => (named.has(row.id) ? { ...row, recipients: named.get(row.id) } : row));
}

function toTransitionRow(item: { email: EmailRef; event: StatusEvent }, now: Date): TransitionRow {
  const { email, event } = item;
  return {
    id: email.id,
    teamId: email.teamId,
    status: event.status,
    from: statusesBefore(event.status),
    at: event.at ?? now,
    ...event.set,
  };
}

/**
 * The events that did not move their email (`moved[i]` false) but may still set their timestamp
 * (statusesPast).
 */
function lateSteps(
  events: readonly { email: EmailRef; event: StatusEvent }[],
  moved: readonly boolean[],
  now: Date,
) {
  return events.flatMap(({ email, event }, index) => {
    const past = event.historyOnly || moved[index] ? [] : statusesPast(event.status);
    return past.length > 0
      ? [{ id: email.id, teamId: email.teamId, status: event.status, past, at: event.at ?? now }]
      : [];
  });
}

/**
 * Splits the indexes of the events that may move a status (not `historyOnly`) into rounds holding at most one event per email, keeping each email's
 * events in order (round k holds every email's k-th event).
 */
function rounds(events: readonly { email: EmailRef; event: StatusEvent }[]): number[][] {
  const result: number[][] = [];
  const seen = new Map<string, number>();
  events.forEach(({ email, event }, index) => {
    if (event.historyOnly) return;
    const n = seen.get(email.id) ?? 0;
    seen.set(email.id, n + 1);
    const round = result[n] ?? [];
    round.push(index);
    result[n] = round;
  });
  return result;
}
