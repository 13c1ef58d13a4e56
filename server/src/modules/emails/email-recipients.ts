import { z } from 'zod';
import type { emailLogs, emailRecipients } from '../../db/schema/index.ts';
import { isoOrNull } from '../../http/envelope.ts';
import { mailboxAddress } from '../../providers/mailbox-address.ts';
import { suppressionKey } from '../suppressions/index.ts';
import { canTransition, EMAIL_STATUSES, type EmailStatus, STATUS_TIMESTAMP } from './email-status.ts';

/**
 * Outcomes per recipient (issue #11): what happened to each address of an email (`to`, `cc`,
 * `bcc`, at most 50), and how the email's own status relates to them.
 *
 * Storage: LAZY. No recipient row is written when an email is accepted, nor when the provider
 * accepts it for every recipient (the common case): the accept path and the worker's hot path keep
 * exactly the statements they had. A recipient's state is derived from its email
 * ({@link impliedRecipientState}) until something happens to that address alone — an SMTP server
 * refused its RCPT while accepting others, or a provider event names it — and only then is its
 * row written (`email_recipients`, one multi-row statement per recorder group or provider request).
 * Eager rows (one multi-row insert per accept group) would have cost a statement and up to 50 rows
 * per email for information the email already holds; the API answers the same either way because
 * {@link presentRecipients} merges the written rows over the implied state.
 *
 * Vocabulary (the field's, as Postmark, SendGrid and SES use it):
 * - hard bounce: the address does not work (SMTP 5xx to RCPT, a provider's permanent bounce):
 *   recipient `bounced`, `bounceType: "hard"`, and the address goes on the suppression list;
 * - soft bounce: a temporary refusal. Refused at RCPT with 4xx while others were accepted: the
 *   message is not retried for it (that would duplicate it for the others), so the recipient is
 *   `bounced` with `bounceType: "soft"`, not suppressed. Reported by a provider (which keeps
 *   trying): `bounceType: "soft"` and the diagnostic, status unchanged;
 * - deferral: the provider is still trying: `deferredAt` and the diagnostic, status unchanged;
 * - complaint: the recipient marked it as spam: recipient `spam`, address suppressed.
 *
 * The email's status is the aggregate (spec "Email status values", ARCHITECTURE.md state machine):
 * it moves forward with the furthest recipient (`delivered` once one delivery is confirmed,
 * `opened`/`clicked` once anyone did, `spam` once anyone complained), but it ends `bounced` (or
 * `failed`) only when EVERY recipient bounced or failed: an email that reached some of its
 * recipients is not resent to all of them (resend is offered for `bounced`/`failed` emails), and
 * the per-recipient rows say who did not get it. An SMTP send that some recipients accepted is
 * `sent`; only a refusal of all of them is `failed` (permanent or transient by the reply code).
 */

export type RecipientKind = (typeof emailRecipients.$inferSelect)['kind'];
export type BounceType = 'hard' | 'soft';
export type RecipientRow = typeof emailRecipients.$inferSelect;
type EmailLogRow = typeof emailLogs.$inferSelect;

/** The state of one recipient: the columns of its row beyond identity. */
export type RecipientState = Pick<
  RecipientRow,
  | 'status'
  | 'diagnostic'
  | 'sentAt'
  | 'deliveredAt'
  | 'openedAt'
  | 'clickedAt'
  | 'bouncedAt'
  | 'failedAt'
  | 'spamAt'
  | 'deferredAt'
> & { bounceType: BounceType | null };

/** One addressee of an email: the mailbox as the caller wrote it, its key and how it was addressed. */
export interface Recipient {
  /** The bare address (`ada@example.com` of `Ada <ada@example.com>`), as shown. */
  address: string;
  /** The bare address lower-cased: rows, events and suppressions are matched by it. */
  key: string;
  kind: RecipientKind;
}

/** What a recipient-specific event says happened (the provider-events kinds, issue #11). */
export interface RecipientEvent {
  kind: 'delivered' | 'opened' | 'clicked' | 'bounced' | 'soft_bounce' | 'deferral' | 'spam' | 'failed';
  at: Date;
  diagnostic?: string | undefined;
}

/** The key rows, events and suppressions match an address by (the suppression list's own key). */
export const recipientKey = suppressionKey;

/**
 * The recipients of an email, `to` then `cc` then `bcc`, each address once (the first kind it
 * appears under wins, as the SMTP envelope carries it once).
 */
export function recipientsOf(
  to: readonly string[],
  cc: readonly string[],
  bcc: readonly string[],
): Recipient[] {
  const seen = new Set<string>();
  const result: Recipient[] = [];
  const add = (list: readonly string[], kind: RecipientKind) => {
    for (const mailbox of list) {
      const key = recipientKey(mailbox);
      if (seen.has(key)) continue;
      seen.add(key);
      result.push({ address: mailboxAddress(mailbox), key, kind });
    }
  };
  add(to, 'to');
  add(cc, 'cc');
  add(bcc, 'bcc');
  return result;
}

/** The email columns a recipient's implied state is read from. */
export type ImpliedFrom = Pick<
  EmailLogRow,
  | 'status'
  | 'errorMessage'
  | 'sentAt'
  | 'deliveredAt'
  | 'openedAt'
  | 'clickedAt'
  | 'bouncedAt'
  | 'failedAt'
  | 'spamAt'
>;

/**
 * The state of a recipient that has no row (nothing recipient-specific happened to it), from its
 * email: `queued`, `failed` and `bounced` emails imply the same for every recipient (with the
 * email's errorMessage as diagnostic; `bounced` is hard: soft bounces never end an email). A `sent`
 * or later email implies `sent` when it has several recipients (an event that named none of them —
 * a tracking pixel, a provider event without an address — cannot be pinned on one), and the
 * email's own state when it has just one (every event is that recipient's).
 */
export function impliedRecipientState(email: ImpliedFrom, recipientCount: number): RecipientState {
  const empty: RecipientState = {
    status: email.status,
    bounceType: null,
    diagnostic: null,
    sentAt: email.sentAt,
    deliveredAt: null,
    openedAt: null,
    clickedAt: null,
    bouncedAt: null,
    failedAt: null,
    spamAt: null,
    deferredAt: null,
  };
  if (email.status === 'failed' || email.status === 'bounced') {
    return {
      ...empty,
      diagnostic: email.errorMessage,
      failedAt: email.failedAt,
      bouncedAt: email.bouncedAt,
      bounceType: email.status === 'bounced' ? 'hard' : null,
    };
  }
  if (email.status === 'queued') return empty;
  if (recipientCount > 1) return { ...empty, status: 'sent' };
  return {
    ...empty,
    deliveredAt: email.deliveredAt,
    openedAt: email.openedAt,
    clickedAt: email.clickedAt,
    spamAt: email.spamAt,
  };
}

/** Recipient statuses that mean the message did not reach the address and will not. */
export function isUndelivered(status: EmailStatus): boolean {
  return status === 'bounced' || status === 'failed';
}

/**
 * `state` after `event` (a pure function): statuses move forward only through the email state
 * machine (ARCHITECTURE.md), each timestamp is set once, when its status is reached; a hard bounce
 * sets `bounceType: "hard"`; a soft bounce and a deferral never move the status (the provider keeps
 * trying) but record the diagnostic, `bounceType: "soft"` or `deferredAt`.
 */
export function applyRecipientEvent(state: RecipientState, event: RecipientEvent): RecipientState {
  const next: RecipientState = { ...state };
  if (event.diagnostic !== undefined) next.diagnostic = event.diagnostic;
  if (event.kind === 'deferral') {
    next.deferredAt = event.at;
    return next;
  }
  if (event.kind === 'soft_bounce') {
    if (state.status !== 'bounced') next.bounceType = 'soft';
    return next;
  }
  const status: EmailStatus = event.kind;
  if (!canTransition(state.status, status)) {
    next.diagnostic = state.diagnostic;
    return next;
  }
  next.status = status;
  const column = STATUS_TIMESTAMP[status];
  const stamps = next as unknown as Record<string, Date | null>;
  if (column in stamps && stamps[column] === null) stamps[column] = event.at;
  if (status === 'bounced') next.bounceType = 'hard';
  return next;
}

/**
 * The state of a recipient refused at RCPT while others were accepted (SMTP 5xx: hard bounce;
 * 4xx: soft bounce, not retried), at `at`, with the reply as diagnostic (e.g.
 * `550 5.1.1 mailbox unavailable`).
 */
export function refusedRecipientState(permanent: boolean, diagnostic: string, at: Date): RecipientState {
  return {
    status: 'bounced',
    bounceType: permanent ? 'hard' : 'soft',
    diagnostic,
    sentAt: null,
    deliveredAt: null,
    openedAt: null,
    clickedAt: null,
    bouncedAt: at,
    failedAt: null,
    spamAt: null,
    deferredAt: null,
  };
}

/** One recipient as the API shows it (`GET /api/logs/:id` `recipients`, `GET /api/logs/:id/recipients`). */
export const recipientView = z.object({
  address: z.string(),
  kind: z.enum(['to', 'cc', 'bcc']),
  status: z.enum(EMAIL_STATUSES),
  bounceType: z.enum(['hard', 'soft']).nullable(),
  diagnostic: z.string().nullable(),
  sentAt: z.string().nullable(),
  deliveredAt: z.string().nullable(),
  openedAt: z.string().nullable(),
  clickedAt: z.string().nullable(),
  bouncedAt: z.string().nullable(),
  failedAt: z.string().nullable(),
  spamAt: z.string().nullable(),
  deferredAt: z.string().nullable(),
});
export type RecipientView = z.infer<typeof recipientView>;

/**
 * Every recipient of `email` (to, cc, bcc in order, each address once) with its state: its row
 * when one was written, else the state its email implies ({@link impliedRecipientState}).
 * Timestamps are ISO 8601 strings or null.
 */
export function presentRecipients(
  email: ImpliedFrom & Pick<EmailLogRow, 'toAddresses'>,
  cc: readonly string[],
  bcc: readonly string[],
  rows: readonly RecipientRow[],
): RecipientView[] {
  const recipients = recipientsOf(email.toAddresses, cc, bcc);
  const byKey = new Map(rows.map((row) => [row.address, row]));
  const implied = impliedRecipientState(email, recipients.length);
  return recipients.map(({ address, key, kind }) => {
    const row = byKey.get(key);
    const state: RecipientState = row ? { ...row, bounceType: row.bounceType as BounceType | null } : implied;
    return {
      address,
      kind,
      status: state.status,
      bounceType: state.bounceType,
      diagnostic: state.diagnostic,
      sentAt: isoOrNull(state.sentAt),
      deliveredAt: isoOrNull(state.deliveredAt),
      openedAt: isoOrNull(state.openedAt),
      clickedAt: isoOrNull(state.clickedAt),
      bouncedAt: isoOrNull(state.bouncedAt),
      failedAt: isoOrNull(state.failedAt),
      spamAt: isoOrNull(state.spamAt),
      deferredAt: isoOrNull(state.deferredAt),
    };
  });
}
