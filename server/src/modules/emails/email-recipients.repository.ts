import { and, eq, inArray, sql } from 'drizzle-orm';
import type { Executor } from '../../db/client.ts';
import { emailRecipients, emailSendOptions } from '../../db/schema/index.ts';
import type { RecipientKind, RecipientRow, RecipientState } from './email-recipients.ts';

/** A recipient row to write: who (email, team, address key, kind) and its whole state. */
export type RecipientWrite = {
  emailId: string;
  teamId: string;
  address: string;
  kind: RecipientKind;
} & RecipientState;

/**
 * SQL of the per-recipient outcomes (issue #11, `email_recipients`; see email-recipients.ts for why
 * rows exist only for recipients something specific happened to).
 */
export const recipientRepository = {
  /** The written rows of `emailIds` within team `teamId` (one query; none for an empty list). */
  async rowsOf(db: Executor, teamId: string, emailIds: readonly string[]): Promise<RecipientRow[]> {
    if (emailIds.length === 0) return [];
    return db
      .select()
      .from(emailRecipients)
      .where(and(eq(emailRecipients.teamId, teamId), inArray(emailRecipients.emailId, [...emailIds])));
  },

  /**
   * The `cc` and `bcc` of `emailIds` within team `teamId` (issue #10 send options), by email id;
   * an email sent without them is absent.
   */
  async copiesOf(
    db: Executor,
    teamId: string,
    emailIds: readonly string[],
  ): Promise<Map<string, { cc: string[]; bcc: string[] }>> {
    if (emailIds.length === 0) return new Map();
    const rows = await db
      .select({ emailId: emailSendOptions.emailId, cc: emailSendOptions.cc, bcc: emailSendOptions.bcc })
      .from(emailSendOptions)
      .where(and(eq(emailSendOptions.teamId, teamId), inArray(emailSendOptions.emailId, [...emailIds])));
    return new Map(rows.map((row) => [row.emailId, { cc: row.cc, bcc: row.bcc }]));
  },

  /**
   * Writes `rows` in ONE statement: inserted, or replacing the state of the row already there for
   * the same email and address (callers compute the whole next state under the email's row lock).
   */
  async upsert(tx: Executor, rows: readonly RecipientWrite[]): Promise<void> {
    if (rows.length === 0) return;
    const now = new Date();
    await tx
      .insert(emailRecipients)
      .values(rows.map((row) => ({ ...row, updatedAt: now })))
      .onConflictDoUpdate({
        target: [emailRecipients.emailId, emailRecipients.address],
        set: {
          status: sql`excluded.status`,
          bounceType: sql`excluded.bounce_type`,
          diagnostic: sql`excluded.diagnostic`,
          sentAt: sql`excluded.sent_at`,
          deliveredAt: sql`excluded.delivered_at`,
          openedAt: sql`excluded.opened_at`,
          clickedAt: sql`excluded.clicked_at`,
          bouncedAt: sql`excluded.bounced_at`,
          failedAt: sql`excluded.failed_at`,
          spamAt: sql`excluded.spam_at`,
          deferredAt: sql`excluded.deferred_at`,
          updatedAt: sql`excluded.updated_at`,
        },
      });
  },
};
