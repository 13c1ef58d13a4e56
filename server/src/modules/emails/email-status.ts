import { emailStatus } from '../../db/schema/index.ts';

/**
 * Email status values (spec "States and transitions") and the one state machine that moves them
 * (ARCHITECTURE.md "Email status state machine"): queued → sent → delivered → opened → clicked;
 * bounced after sent/delivered; failed from queued/sent; spam after sent/delivered/opened/clicked.
 * A status never moves backwards: a late event is kept in the history but does not change `status`;
 * a late step of the delivery path still sets its own timestamp once (see {@link statusesPast}).
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

/** The delivery path in order: each step implies the ones before it. */
const DELIVERY_PATH: readonly EmailStatus[] = ['queued', 'sent', 'delivered', 'opened', 'clicked'];

/**
 * The statuses already past `status` on the delivery path (queued → sent → delivered → opened →
 * clicked): an email in one of them that gets a late `status` event keeps its status (forward
 * only) but gets `status`'s timestamp if it has none (issue #11: "each transition sets its
 * timestamp once"; a `delivered` arriving after `opened` still sets `deliveredAt`). Empty for a
 * status off the path (bounced, failed, spam) and for `clicked`.
 */
export function statusesPast(status: EmailStatus): EmailStatus[] {
  const index = DELIVERY_PATH.indexOf(status);
  return index < 0 ? [] : DELIVERY_PATH.slice(index + 1);
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
