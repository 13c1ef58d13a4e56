import { and, type Column, eq, type SQL, sql } from 'drizzle-orm';
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

/** `column = any($1::text[])`: one array parameter however many `ids`. */
function anyOf(column: Column, ids: readonly string[]): SQL {
  return sql`${column} = any(${sql.param([...ids])}::text[])`;
}

/**
 * SQL of the per-recipient outcomes (issue #11, `email_recipients`; see email-recipients.ts for why
 * rows exist only for recipients something specific happened to).
 * Lists travel as ONE parameter each (a text[] or a JSON document), never one parameter per value:
 * a provider's batch (5 MB) may name more than PostgreSQL's 65,535 bound parameters allow.
 */
export const recipientRepository = {
  /** The written rows of `emailIds` within team `teamId` (one query; none for an empty list). */
  async rowsOf(db: Executor, teamId: string, emailIds: readonly string[]): Promise<RecipientRow[]> {
    if (emailIds.length === 0) return [];
    return db
      .select()
      .from(emailRecipients)
      .where(and(eq(emailRecipients.teamId, teamId), anyOf(emailRecipients.emailId, emailIds)));
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
      .where(and(eq(emailSendOptions.teamId, teamId), anyOf(emailSendOptions.emailId, emailIds)));
    return new Map(rows.map((row) => [row.emailId, { cc: row.cc, bcc: row.bcc }]));
  },

  /**
   * Writes `rows` in ONE statement: inserted, or replacing the state of the row already there for
   * the same email and address (callers compute the whole next state under the email's row lock).
   * The rows travel as one JSON parameter (`jsonb_to_recordset`), so any number of them fits.
   * `rows` must name each (email, address) once (PostgreSQL refuses to update a row twice).
   */
  async upsert(tx: Executor, rows: readonly RecipientWrite[]): Promise<void> {
    if (rows.length === 0) return;
    const source = rows.map((row) => ({
      email_id: row.emailId,
      team_id: row.teamId,
      address: row.address,
      kind: row.kind,
      status: row.status,
      bounce_type: row.bounceType,
      diagnostic: row.diagnostic,
      sent_at: row.sentAt,
      delivered_at: row.deliveredAt,
      opened_at: row.openedAt,
      clicked_at: row.clickedAt,
      bounced_at: row.bouncedAt,
      failed_at: row.failedAt,
      spam_at: row.spamAt,
      deferred_at: row.deferredAt,
    }));
    await tx.execute(sql`
      insert into ${emailRecipients} (email_id, team_id, address, kind, status, bounce_type, diagnostic,
        sent_at, delivered_at, opened_at, clicked_at, bounced_at, failed_at, spam_at, deferred_at, updated_at)
      select v.email_id, v.team_id, v.address, v.kind::recipient_kind, v.status::email_status, v.bounce_type,
        v.diagnostic, v.sent_at, v.delivered_at, v.opened_at, v.clicked_at, v.bounced_at, v.failed_at,
        v.spam_at, v.deferred_at, ${new Date().toISOString()}::timestamptz
      from jsonb_to_recordset(${JSON.stringify(source)}::jsonb) as v(email_id text, team_id text,
        address text, kind text, status text, bounce_type text, diagnostic text, sent_at timestamptz,
        delivered_at timestamptz, opened_at timestamptz, clicked_at timestamptz, bounced_at timestamptz,
        failed_at timestamptz, spam_at timestamptz, deferred_at timestamptz)
      on conflict (email_id, address) do update set
        status = excluded.status,
        bounce_type = excluded.bounce_type,
        diagnostic = excluded.diagnostic,
        sent_at = excluded.sent_at,
        delivered_at = excluded.delivered_at,
        opened_at = excluded.opened_at,
        clicked_at = excluded.clicked_at,
        bounced_at = excluded.bounced_at,
        failed_at = excluded.failed_at,
        spam_at = excluded.spam_at,
        deferred_at = excluded.deferred_at,
        updated_at = excluded.updated_at`);
  },
};
