import { emailStatus } from '../../db/schema/index.ts';

/**
 * Email status values (spec "States and transitions") and the one state machine that moves them
 * (ARCHITECTURE.md "Email status state machine"): queued → sent → delivered → opened → clicked;
 * bounced after sent/delivered; failed from queued/sent; spam after sent/delivered/opened/clicked.
 * A status never moves backwards: a late event is kept in the history but does not change `status`.
 */
export const EMAIL_STATUSES = emailStatus.enumValues;
export type EmailStatus = (typeof EMAIL_STATUSES)[number];

const NEXT: Record<EmailStatus, readonly EmailStatus[]> = {
  queued: ['sent', 'failed'],
  sent: ['delivered', 'opened', 'clicked', 'bounced', 'failed', 'spam'],
  delivered: ['opened', 'clicked', 'bounced', 'spam'],
  opened: ['clicked', 'spam'],
  clicked: ['spam'],
  bounced: [],
  failed: [],
  spam: [],
};

/** True when an email in `from` may move to `to`. */
export function canTransition(from: EmailStatus, to: EmailStatus): boolean {
  return NEXT[from].includes(to);
}

/** The statuses an email may be in to move to `to` (the inverse of the table above). */
export function statusesBefore(to: EmailStatus): EmailStatus[] {
  return EMAIL_STATUSES.filter((from) => canTransition(from, to));
}

/** The email-log column that records when each status was first reached. */
export const STATUS_TIMESTAMP = {
  queued: 'createdAt',
  sent: 'sentAt',
  delivered: 'deliveredAt',
  opened: 'openedAt',
  clicked: 'clickedAt',
  bounced: 'bouncedAt',
  failed: 'failedAt',
  spam: 'spamAt',
} as const satisfies Record<EmailStatus, string>;

/** True when `value` is one of the spec's email statuses. */
export function isEmailStatus(value: string): value is EmailStatus {
  return (EMAIL_STATUSES as readonly string[]).includes(value);
}
