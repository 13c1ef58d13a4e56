import { asc, gt, type SQL, sql } from 'drizzle-orm';
import type { Executor } from '../../db/client.ts';
import {
  emailLogs,
  idempotencyKeys,
  providerEventTokens,
  sessions,
  teams,
  templateVersions,
  webhookDeliveries,
  webhooks,
} from '../../db/schema/index.ts';

/**
 * The maintenance loop's deletes (review finding "growth"). Each deletes at most `limit` rows in
 * one statement, found through an index: a sweep repeats it until fewer come back, so no statement
 * holds its locks, or fills the WAL, for long. Rows go by `ctid` (a TID scan) after the index scan
 * picked them; a row updated in between has a new ctid and is simply left for the next batch.
 * Each returns the number of rows it deleted.
 */

/**
 * How long a provider event token is kept (ms): 1 h, well over any claim's window (Mailgun's is
 * 10 min, provider-events/mailgun.events.ts MAILGUN_TOKEN_MEMORY_MS). A claim may not ask for a
 * longer one (provider-event-tokens.ts), or a replay could outlive its token.
 */
export const PROVIDER_EVENT_TOKEN_RETENTION_MS = 60 * 60_000;

/** Sessions expired at least this long ago are deleted (a day: better-auth already refuses them). */
const EXPIRED_SESSION_GRACE_DAYS = 1;

/** How many rows a DELETE statement removed (node-postgres `rowCount`). */
async function deleted(statement: Promise<unknown>): Promise<number> {
  return ((await statement) as { rowCount: number | null }).rowCount ?? 0;
}

/**
 * The statement of {@link maintenanceRepository.deleteOrphanedTemplateVersions} (exported for the
 * test that checks its plan uses the partial indexes): one row `{examined, last, deleted}`.
 */
export function orphanedTemplateVersionsDelete(after: string, limit: number): SQL {
  return sql`
    with candidates as (
      select ${templateVersions.id} as id, ctid from ${templateVersions}
      where ${templateVersions.templateId} is null and ${templateVersions.id} > ${after}
      order by ${templateVersions.id}
      limit ${limit}
    ), gone as (
      delete from ${templateVersions} where ctid = any(array(
        select c.ctid from candidates c
        where not exists (
          select 1 from ${emailLogs} l where l.template_id is null and l.template_version_id = c.id)))
      returning 1
    )
    select count(*)::int as examined, coalesce(max(id), '') as last, (select count(*)::int from gone) as deleted
    from candidates`;
}

export const maintenanceRepository = {
  /**
   * Idempotency keys past their 24 h (emails/idempotency.ts): never answered from again (a claim
   * takes an expired row over), so deleting them only keeps the table small. By
   * idempotency_keys_expires_idx.
   */
  deleteExpiredIdempotencyKeys(db: Executor, limit: number): Promise<number> {
    return deleted(
      db.execute(sql`
        delete from ${idempotencyKeys} where ctid = any(array(
          select ctid from ${idempotencyKeys} where ${idempotencyKeys.expiresAt} < now() limit ${limit}))`),
    );
  },

  /**
   * Dashboard sessions that expired more than a day ago. better-auth deletes an expired session
   * only when its cookie comes back, so one whose browser never returns (a private window, a
   * script signing in on each run) stayed for ever with its IP address and user agent. By
   * sessions_expires_at_idx.
   */
  deleteExpiredSessions(db: Executor, limit: number): Promise<number> {
    return deleted(
      db.execute(sql`
        delete from ${sessions} where ctid = any(array(
          select ctid from ${sessions}
          where ${sessions.expiresAt} < now() - make_interval(days => ${EXPIRED_SESSION_GRACE_DAYS})
          limit ${limit}))`),
    );
  },

  /**
   * Provider event tokens seen more than {@link PROVIDER_EVENT_TOKEN_RETENTION_MS} ago, of every
   * adapter (a claim ignores them already). By provider_event_tokens_seen_at_idx.
   */
  deleteOldProviderEventTokens(db: Executor, limit: number): Promise<number> {
    return deleted(
      db.execute(sql`
        delete from ${providerEventTokens} where ctid = any(array(
          select ctid from ${providerEventTokens}
          where ${providerEventTokens.seenAt}
            < now() - make_interval(secs => ${PROVIDER_EVENT_TOKEN_RETENTION_MS / 1000})
          limit ${limit}))`),
    );
  },

  /**
   * Email logs of team `teamId` created more than `days` days ago, but those still `queued`
   * (scheduled, or waiting for a retry: their job still reads them). Their events, recipients,
   * send options and attachments go with them (ON DELETE CASCADE). By email_logs_team_created_idx.
   */
  deleteOldEmailLogs(db: Executor, teamId: string, days: number, limit: number): Promise<number> {
    return deleted(
      db.execute(sql`
        delete from ${emailLogs} where ctid = any(array(
          select ctid from ${emailLogs}
          where ${emailLogs.teamId} = ${teamId}
            and ${emailLogs.createdAt} < now() - make_interval(days => ${days})
            and ${emailLogs.status} <> 'queued'
          limit ${limit}))`),
    );
  },

  /**
   * The versions of deleted templates (`template_id` null) that no email log names, among the first
   * `limit` such versions after id `after` (id order): deleting a template keeps the versions its
   * logs name, so they can be re-rendered; once retention deleted those logs, or for a template
   * deleted before versions were deleted with it, nothing else would (review finding diff19 1).
   * A log naming a deleted template's version has its `template_id` null too (the same ON DELETE SET
   * NULL), and no new log can name one (a send or resend needs its template), so the check cannot
   * race a writer. By template_versions_orphan_idx and email_logs_orphan_version_idx (both partial:
   * rows of deleted templates only). Each examined version is deleted or kept, so a walk by `last`
   * moves on.
   * @returns `examined` (versions looked at, ≤ `limit`), `last` (the last one's id, '' for none) and
   *   `deleted`.
   */
  async deleteOrphanedTemplateVersions(
    db: Executor,
    after: string,
    limit: number,
  ): Promise<{ examined: number; last: string; deleted: number }> {
    const result = await db.execute(orphanedTemplateVersionsDelete(after, limit));
    const [row] = (result as unknown as { rows: { examined: number; last: string; deleted: number }[] }).rows;
    return row ?? { examined: 0, last: '', deleted: 0 };
  },

  /**
   * Delivery records of webhook `webhookId` created more than `days` days ago (a redeliver of one
   * answers 404 from then on). By webhook_deliveries_webhook_idx.
   */
  deleteOldWebhookDeliveries(db: Executor, webhookId: string, days: number, limit: number): Promise<number> {
    return deleted(
      db.execute(sql`
        delete from ${webhookDeliveries} where ctid = any(array(
          select ctid from ${webhookDeliveries}
          where ${webhookDeliveries.webhookId} = ${webhookId}
            and ${webhookDeliveries.createdAt} < now() - make_interval(days => ${days})
          limit ${limit}))`),
    );
  },

  /** Up to `limit` team ids after `after`, in id order (the primary key): the retention's walk. */
  async teamIdsAfter(db: Executor, after: string, limit: number): Promise<string[]> {
    const rows = await db
      .select({ id: teams.id })
      .from(teams)
      .where(gt(teams.id, after))
      .orderBy(asc(teams.id))
      .limit(limit);
    return rows.map((row) => row.id);
  },

  /** Up to `limit` webhook ids after `after`, in id order (the primary key): the retention's walk. */
  async webhookIdsAfter(db: Executor, after: string, limit: number): Promise<string[]> {
    const rows = await db
      .select({ id: webhooks.id })
      .from(webhooks)
      .where(gt(webhooks.id, after))
      .orderBy(asc(webhooks.id))
      .limit(limit);
    return rows.map((row) => row.id);
  },
};
