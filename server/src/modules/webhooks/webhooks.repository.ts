import { and, desc, eq, inArray, max, type SQL, sql } from 'drizzle-orm';
import type { Executor } from '../../db/client.ts';
import { webhookDeliveries, webhooks } from '../../db/schema/index.ts';

export type WebhookRow = typeof webhooks.$inferSelect;
export type NewWebhookRow = typeof webhooks.$inferInsert;
export type WebhookDeliveryRow = typeof webhookDeliveries.$inferSelect;
export type NewWebhookDeliveryRow = typeof webhookDeliveries.$inferInsert;

/** The webhook columns an update may write. */
export type WebhookChanges = Partial<
  Pick<
    WebhookRow,
    | 'name'
    | 'url'
    | 'events'
    | 'isActive'
    | 'disabledReason'
    | 'secretEncrypted'
    | 'previousSecretEncrypted'
    | 'previousSecretExpiresAt'
    | 'consecutiveFailures'
    | 'failingSince'
  >
>;

/**
 * What a group of attempts did to one webhook, folded in order (see webhook-delivery.job.ts):
 * `lastSuccessAt` when one succeeded; `failuresAfter` the failures after the last success (or all);
 * `firstFailureAt` the first of those; `gone` when one got 410.
 */
export interface WebhookAttemptSummary {
  webhookId: string;
  lastTriggeredAt: Date;
  lastSuccessAt: Date | null;
  failuresAfter: number;
  firstFailureAt: Date | null;
  gone: boolean;
}

/** SQL for webhooks and their delivery records; every query is scoped by team. */
export const webhookRepository = {
  async insert(db: Executor, row: NewWebhookRow): Promise<WebhookRow> {
    const [created] = await db.insert(webhooks).values(row).returning();
    return created!;
  },

  list(db: Executor, teamId: string): Promise<WebhookRow[]> {
    return db.select().from(webhooks).where(eq(webhooks.teamId, teamId)).orderBy(desc(webhooks.createdAt));
  },

  async find(db: Executor, teamId: string, id: string): Promise<WebhookRow | undefined> {
    const [row] = await db
      .select()
      .from(webhooks)
      .where(and(eq(webhooks.teamId, teamId), eq(webhooks.id, id)));
    return row;
  },

  /** The webhooks with these ids (any team: job payloads name their own), in no order. */
  findMany(db: Executor, ids: readonly string[]): Promise<WebhookRow[]> {
    if (ids.length === 0) return Promise.resolve([]);
    return db
      .select()
      .from(webhooks)
      .where(inArray(webhooks.id, [...ids]));
  },

  async update(
    db: Executor,
    teamId: string,
    id: string,
    changes: WebhookChanges,
  ): Promise<WebhookRow | undefined> {
    const [row] = await db
      .update(webhooks)
      .set({ ...changes, updatedAt: new Date() })
      .where(and(eq(webhooks.teamId, teamId), eq(webhooks.id, id)))
      .returning();
    return row;
  },

  async delete(db: Executor, teamId: string, id: string): Promise<boolean> {
    const rows = await db
      .delete(webhooks)
      .where(and(eq(webhooks.teamId, teamId), eq(webhooks.id, id)))
      .returning({ id: webhooks.id });
    return rows.length > 0;
  },

  /** The active webhooks of these teams with the events they subscribe to (the fan-out's query). */
  activeSubscribers(
    db: Executor,
    teamIds: readonly string[],
  ): Promise<Pick<WebhookRow, 'id' | 'teamId' | 'events'>[]> {
    return db
      .select({ id: webhooks.id, teamId: webhooks.teamId, events: webhooks.events })
      .from(webhooks)
      .where(and(inArray(webhooks.teamId, [...teamIds]), eq(webhooks.isActive, true)));
  },

  /**
   * An SQL condition, true when no active webhook of `teamIds` subscribes to any of `events` (the
   * rows {@link activeSubscribers} would find with one of those events): evaluated in the caller's
   * statement and snapshot.
   */
  noActiveSubscriber(teamIds: readonly string[], events: readonly string[]): SQL {
    return sql`not exists (select 1 from ${webhooks} where ${webhooks.teamId} = any(${sql.param([...teamIds])}::text[])
      and ${webhooks.isActive} and ${webhooks.events} && ${sql.param([...events])}::text[])`;
  },

  /**
   * Records attempts with ONE statement (one round trip, issue #11 throughput): inserts the
   * delivery records `rows` (they travel as one JSON parameter, `jsonb_to_recordset`: far cheaper
   * to build than Drizzle's bound parameter per value) and applies the attempt `summaries` to their
   * webhooks: success resets `consecutiveFailures` and `failingSince`; failures add up and keep the
   * first failure's time; the webhook is disabled (`isActive=false`, `disabledReason`) on a 410
   * Gone, or when it has failed without a success since `disableBefore` or earlier (issue #11: 5
   * days). With `asyncCommit`, the statement also sets `synchronous_commit = off` for the rest of
   * the transaction (`set_config(…, true)`; the caller's reason to need no WAL flush at commit).
   * With `complete` (an `update … returning id` completing the attempts' jobs, see
   * JobQueue.completionSql), the statement completes them too: run outside a transaction it is
   * then the whole recording, atomic, in one round trip.
   * @returns each updated webhook's id and whether it is still active afterwards.
   */
  async recordAttempts(
    db: Executor,
    rows: readonly (NewWebhookDeliveryRow & { createdAt: Date })[],
    summaries: readonly WebhookAttemptSummary[],
    disableBefore: Date,
    options: { asyncCommit?: boolean; complete?: SQL | undefined } = {},
  ): Promise<Map<string, boolean>> {
    if (rows.length === 0 && summaries.length === 0 && !options.complete) return new Map();
    const deliveries = JSON.stringify(
      rows.map((r) => ({
        id: r.id,
        team_id: r.teamId,
        webhook_id: r.webhookId,
        message_id: r.messageId,
        event: r.event,
        payload: r.payload,
        response_status: r.responseStatus ?? null,
        response_body: r.responseBody ?? null,
        success: r.success ?? false,
        attempt_count: r.attemptCount ?? 0,
        duration_ms: r.durationMs ?? null,
        error: r.error ?? null,
        created_at: r.createdAt.toISOString(),
      })),
    );
    const source = JSON.stringify(
      summaries.map((s) => ({
        id: s.webhookId,
        last_triggered_at: s.lastTriggeredAt.toISOString(),
        last_success_at: s.lastSuccessAt?.toISOString() ?? null,
        failures_after: s.failuresAfter,
        first_failure_at: s.firstFailureAt?.toISOString() ?? null,
        gone: s.gone,
      })),
    );
    const failures = sql`case when v.last_success_at is not null then v.failures_after
      else ${webhooks.consecutiveFailures} + v.failures_after end`;
    const failingSince = sql`case when v.last_success_at is not null then v.first_failure_at
      else coalesce(${webhooks.failingSince}, v.first_failure_at) end`;
    const disable = sql`(v.gone or (v.failures_after > 0 and (${failingSince}) <= ${disableBefore.toISOString()}::timestamptz))`;
    const reason = sql`case when v.gone then 'The receiver answered 410 Gone'
      else 'Every delivery failed for 5 days (' || (${failures})::text || ' attempts in a row)' end`;
    // The insert and the completion are data-modifying CTEs (always run, whatever the update
    // reads); the setting is a plain CTE, run because the insert reads it.
    const result = (await db.execute(sql`
      with setting as (
        ${options.asyncCommit ? sql`select set_config('synchronous_commit', 'off', true)` : sql`select 1`}
      ),
      ${options.complete ? sql`completed as (${options.complete}),` : sql``}
      inserted as (
        insert into ${webhookDeliveries} (id, team_id, webhook_id, message_id, event, payload,
          response_status, response_body, success, attempt_count, duration_ms, error, created_at)
        select x.id, x.team_id, x.webhook_id, x.message_id, x.event, x.payload, x.response_status,
          x.response_body, x.success, x.attempt_count, x.duration_ms, x.error, x.created_at
        from setting, jsonb_to_recordset(${deliveries}::jsonb) as x(id text, team_id text,
          webhook_id text, message_id text, event text, payload jsonb, response_status integer,
          response_body text, success boolean, attempt_count integer, duration_ms integer,
          error text, created_at timestamptz)
      )
      update ${webhooks} set
        consecutive_failures = ${failures},
        failing_since = ${failingSince},
        last_triggered_at = greatest(${webhooks.lastTriggeredAt}, v.last_triggered_at),
        last_success_at = coalesce(v.last_success_at, ${webhooks.lastSuccessAt}),
        is_active = case when ${disable} then false else ${webhooks.isActive} end,
        disabled_reason = case when ${disable} and ${webhooks.isActive} then ${reason}
          else ${webhooks.disabledReason} end
      from jsonb_to_recordset(${source}::jsonb) as v(id text, last_triggered_at timestamptz,
        last_success_at timestamptz, failures_after integer, first_failure_at timestamptz,
        gone boolean)
      where ${webhooks.id} = v.id
      returning ${webhooks.id} as id, ${webhooks.isActive} as is_active`)) as unknown as {
      rows: { id: string; is_active: boolean }[];
    };
    return new Map(result.rows.map((row) => [row.id, row.is_active]));
  },

  /** A webhook's delivery records, newest first, optionally only (un)successful ones. */
  listDeliveries(
    db: Executor,
    teamId: string,
    webhookId: string,
    query: { success?: boolean | undefined; limit: number },
  ): Promise<WebhookDeliveryRow[]> {
    const conditions: SQL[] = [
      eq(webhookDeliveries.teamId, teamId),
      eq(webhookDeliveries.webhookId, webhookId),
    ];
    if (query.success !== undefined) conditions.push(eq(webhookDeliveries.success, query.success));
    return db
      .select()
      .from(webhookDeliveries)
      .where(and(...conditions))
      .orderBy(desc(webhookDeliveries.createdAt), desc(webhookDeliveries.id))
      .limit(query.limit);
  },

  async findDelivery(
    db: Executor,
    teamId: string,
    webhookId: string,
    id: string,
  ): Promise<WebhookDeliveryRow | undefined> {
    const [row] = await db
      .select()
      .from(webhookDeliveries)
      .where(
        and(
          eq(webhookDeliveries.teamId, teamId),
          eq(webhookDeliveries.webhookId, webhookId),
          eq(webhookDeliveries.id, id),
        ),
      );
    return row;
  },

  /** The highest attempt number recorded for a message to a webhook (0 when none). */
  async lastAttempt(db: Executor, webhookId: string, messageId: string): Promise<number> {
    const [row] = await db
      .select({ n: max(webhookDeliveries.attemptCount) })
      .from(webhookDeliveries)
      .where(and(eq(webhookDeliveries.webhookId, webhookId), eq(webhookDeliveries.messageId, messageId)));
    return row?.n ?? 0;
  },
};
