import { sql } from 'drizzle-orm';
import type { Executor } from '../../db/client.ts';
import { emailSendOptions } from '../../db/schema/index.ts';
import type { EmailTags } from '../../providers/types.ts';

/** The caller's own fields of an email that travel with its events (issue #11 payloads). */
export interface CallerFields {
  /** The send's `metadata` (string map), when it carried a non-empty one. */
  metadata?: Record<string, string>;
  /** The send's `tags` (a list of labels or labels name → value, as sent), when it carried some. */
  tags?: EmailTags;
}

/**
 * The `metadata` and `tags` the sends of `emails` carried (issue #11: webhook payloads carry them;
 * README "Events"), by email id; emails sent without them, or with empty maps, are absent. ONE
 * query with array parameters (any batch size), scoped to each email's own team.
 * @param emails the emails (id and team) whose fields to read.
 */
export async function callerFieldsOf(
  tx: Executor,
  emails: readonly { id: string; teamId: string }[],
): Promise<Map<string, CallerFields>> {
  const found = new Map<string, CallerFields>();
  if (emails.length === 0) return found;
  const rows = await tx
    .select({
      emailId: emailSendOptions.emailId,
      tags: emailSendOptions.tags,
      metadata: emailSendOptions.metadata,
    })
    .from(emailSendOptions)
    .where(
      sql`(${emailSendOptions.emailId}, ${emailSendOptions.teamId}) in (select * from unnest(${sql.param(
        emails.map((email) => email.id),
      )}::text[], ${sql.param(emails.map((email) => email.teamId))}::text[]))`,
    );
  for (const row of rows) {
    const fields: CallerFields = {};
    if (nonEmpty(row.metadata)) fields.metadata = row.metadata;
    if (nonEmpty(row.tags)) fields.tags = row.tags;
    if (fields.metadata || fields.tags) found.set(row.emailId, fields);
  }
  return found;
}

function nonEmpty(value: unknown): value is Record<string, string> {
  return typeof value === 'object' && value !== null && Object.keys(value).length > 0;
}
