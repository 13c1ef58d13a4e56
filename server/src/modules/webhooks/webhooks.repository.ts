import { and, desc, eq, inArray, max, type SQL, sql } from 'drizzle-orm';
import type { Executor } from '../../db/client.ts';
import { NamedStatement, poolOf } from '../../db/named-statement.ts';
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
    | 'consecutiveFailures'
    | 'failingSince'
  >
>;

/**
 * What a group of attempts did to one webhook, folded in order (see webhook-delivery.job.ts):
 * `lastSuccessAt` when one succeeded; `failuresAfter` the failures after the last success (or all);
 * `firstFailureAt` the first of those; `gone` when one got 410; `failed` when any attempt failed
 * (the row is then always updated and returned, see recordAttempts); `finalFailure` when one of
 * the failures after the last success was its message's last attempt (no retry follows it).
 */
export interface WebhookAttemptSummary {
  webhookId: string;
  lastTriggeredAt: Date;
  lastSuccessAt: Date | null;
  failuresAfter: number;
  firstFailureAt: Date | null;
  gone: boolean;
  failed: boolean;
  finalFailure: boolean;
}

/** findMany's prepared statement per database (or transaction) it ran on. */
const findManyStatements = new WeakMap<
  Executor,
  { execute(values: { ids: string[] }): Promise<WebhookRow[]> }
>();

/**
 * A job claimed by recordAttempts' hand-off (JobQueue.handoffStatement), for JobQueue.adopt, with
 * its webhook's `updatedAt` and `isActive` as that statement saw them (null: the webhook is gone).
 */
export interface HandedJob {
  id: string;
  data: unknown;
  retryCount: number;
  webhook: { updatedAt: Date; isActive: boolean } | null;
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

  /**
   * The webhooks with these ids (any team: job payloads name their own), in no order. A named
   * statement (the delivery worker runs it once per claimed batch): parsed and planned once per
   * connection.
   */
  findMany(db: Executor, ids: readonly string[]): Promise<WebhookRow[]> {
    if (ids.length === 0) return Promise.resolve([]);
    let prepared = findManyStatements.get(db);
    if (!prepared) {
      prepared = db
        .select()
        .from(webhooks)
        .where(sql`${webhooks.id} = any(${sql.placeholder('ids')}::text[])`)
        .prepare('webhooks_find_many');
      findManyStatements.set(db, prepared);
    }
    return prepared.execute({ ids: [...ids] });
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

  /**
   * Rotates the secret of webhook `id` of `teamId` in ONE statement (two rotations at once both
   * take effect, each keeping the other's secret): `secretEncrypted` becomes the webhook's secret,
   * the one it replaces joins `previousSecrets` until `expiresAt`, and previous secrets past their
   * own expiry leave; `updatedAt` moves (the delivery worker's kept rows are keyed by it).
   * @returns the updated row, undefined when there is no such webhook.
   */
  async rotateSecret(
    db: Executor,
    teamId: string,
    id: string,
    secretEncrypted: string,
    expiresAt: Date,
  ): Promise<WebhookRow | undefined> {
    const [row] = await db
      .update(webhooks)
      .set({
        secretEncrypted,
        previousSecrets: sql`coalesce((select jsonb_agg(kept) from jsonb_array_elements(${webhooks.previousSecrets}) kept
          where (kept ->> 'expiresAt')::timestamptz > now()), '[]'::jsonb)
          || jsonb_build_array(jsonb_build_object('secret', ${webhooks.secretEncrypted}, 'expiresAt', ${expiresAt.toISOString()}::text))`,
        updatedAt: sql`now()`,
      })
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
   * to build than Drizzle's bound parameter per value; a row's `payloadJson`, when given, is its
   * payload already serialised — the request body — and is spliced in rather than serialised
   * again) and applies the attempt `summaries` to their webhooks: success resets
   * `consecutiveFailures` and `failingSince`; failures add up and keep the first failure's time;
   * the webhook is disabled (`isActive=false`, `disabledReason`) on a 410 Gone, or when it has
   * failed without a success since `disableBefore` or earlier (issue #11: 5 days). With
   * `asyncCommit`, the statement also sets `synchronous_commit = off` for the rest of the
   * transaction (`set_config(…, true)`; the caller's reason to need no WAL flush at commit).
   * With `complete` (JobQueue.completionStatement: an `update … returning id` completing the attempts'
   * jobs, `completeValues` its placeholders' values; outside a transaction only), the statement
   * completes them too: it is then the whole recording, atomic, in one round trip. Outside a
   * transaction it runs as a named statement built once (NamedStatement: parsed and planned once
   * per connection, not on every group).
   * A webhook whose attempts all succeeded, with no failures to reset, is updated only when its
   * `lastTriggeredAt` or `lastSuccessAt` lag more than TIMESTAMPS_THROTTLE behind them.
   * With `handoff` too (JobQueue.handoffStatement), the statement claims waiting jobs in the
   * completed ones' place and returns them.
   * @returns `active`: each updated webhook's id and whether it is still active afterwards (every
   *   webhook with a failed attempt among them); `handed`: the jobs the hand-off claimed.
   */
  async recordAttempts(
    db: Executor,
    rows: readonly (NewWebhookDeliveryRow & { createdAt: Date; payloadJson?: string | undefined })[],
    summaries: readonly WebhookAttemptSummary[],
    disableBefore: Date,
    options: {
      asyncCommit?: boolean;
      /** JobQueue.completionStatement of the jobs' queue, with `completeValues` its placeholders' values. */
      complete?: SQL | undefined;
      /**
       * With `complete`: JobQueue.handoffStatement of the same queue (its values in
       * `completeValues` too); the jobs it claims come back in `handed`.
       */
      handoff?: SQL | undefined;
      completeValues?: Record<string, unknown>;
    } = {},
  ): Promise<{ active: Map<string, boolean>; handed: HandedJob[] }> {
    if (rows.length === 0 && summaries.length === 0 && !options.complete)
      return { active: new Map(), handed: [] };
    const values: RecordValues = {
      deliveries: `[${rows.map(deliveryJson).join(',')}]`,
      summaries: JSON.stringify(
        summaries.map((s) => ({
          id: s.webhookId,
          last_triggered_at: s.lastTriggeredAt.toISOString(),
          last_success_at: s.lastSuccessAt?.toISOString() ?? null,
          failures_after: s.failuresAfter,
          first_failure_at: s.firstFailureAt?.toISOString() ?? null,
          gone: s.gone,
          failed: s.failed,
          final_failure: s.finalFailure,
        })),
      ),
      disableBefore: disableBefore.toISOString(),
      ...options.completeValues,
    };
    const asyncCommit = options.asyncCommit ?? false;
    const pool = poolOf(db);
    type Row = {
      id: string;
      is_active: boolean;
      handed?: boolean;
      data?: unknown;
      retry_count?: number;
      webhook_updated_at?: Date | null;
      webhook_active?: boolean | null;
    };
    let result: Row[];
    if (pool) {
      const handoff = options.complete ? options.handoff : undefined;
      const statement = recordStatementFor(asyncCommit, options.complete, handoff);
      result = await statement.run(pool, values);
    } else {
      if (options.complete) throw new Error('recordAttempts: a completion runs outside a transaction only');
      // In a transaction (a group with retries, the test and redeliver endpoints): Drizzle on the
      // transaction's connection, the values in place of the placeholders.
      const query = recordAttemptsSql(asyncCommit, undefined, undefined, (key) => values[key]);
      result = ((await db.execute(query)) as unknown as { rows: typeof result }).rows;
    }
    const active = new Map<string, boolean>();
    const handed: HandedJob[] = [];
    for (const row of result) {
      if (row.handed)
        handed.push({
          id: row.id,
          data: row.data,
          retryCount: row.retry_count ?? 0,
          webhook: row.webhook_updated_at
            ? { updatedAt: row.webhook_updated_at, isActive: row.webhook_active === true }
            : null,
        });
      else active.set(row.id, row.is_active);
    }
    return { active, handed };
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

/**
 * One delivery record as the JSON object `recordAttempts` reads (snake_case columns), with
 * `payloadJson` spliced in as the payload when the row has it (the exact body sent).
 */
function deliveryJson(
  r: NewWebhookDeliveryRow & { createdAt: Date; payloadJson?: string | undefined },
): string {
  const fields = JSON.stringify({
    id: r.id,
    team_id: r.teamId,
    webhook_id: r.webhookId,
    message_id: r.messageId,
    event: r.event,
    response_status: r.responseStatus ?? null,
    response_body: r.responseBody ?? null,
    success: r.success ?? false,
    attempt_count: r.attemptCount ?? 0,
    duration_ms: r.durationMs ?? null,
    error: r.error ?? null,
    created_at: r.createdAt.toISOString(),
  });
  return `${fields.slice(0, -1)},"payload":${r.payloadJson ?? JSON.stringify(r.payload)}}`;
}

/**
 * How far a webhook's `lastTriggeredAt` and `lastSuccessAt` may lag behind its newest attempt
 * (issue #11 bench): a group of successful attempts of a webhook with no failures to reset moves
 * them only when they are older than this. Every attempt of a busy webhook otherwise updated its
 * one row, and the groups of attempts in flight took turns on that row's lock, each waiting for
 * the other's commit. Failures, resets and disabling are never throttled.
 */
const TIMESTAMPS_THROTTLE = sql.raw(`interval '1 second'`);

/** The values of recordAttempts' statement: its placeholders (and the completion's, if any). */
type RecordValues = { deliveries: string; summaries: string; disableBefore: string } & Record<
  string,
  unknown
>;

/**
 * recordAttempts' statement, with `value(key)` where each value goes (a placeholder for a named
 * statement, the value itself in a transaction). The insert and the completion are
 * data-modifying CTEs (always run, whatever the update reads); the setting is a plain CTE, run
 * because the insert reads it.
 */
function recordAttemptsSql(
  asyncCommit: boolean,
  complete: SQL | undefined,
  handoff: SQL | undefined,
  value: (key: 'deliveries' | 'summaries' | 'disableBefore') => unknown,
): SQL {
  const failures = sql`case when v.last_success_at is not null then v.failures_after
      else ${webhooks.consecutiveFailures} + v.failures_after end`;
  const failingSince = sql`case when v.last_success_at is not null then v.first_failure_at
      else coalesce(${webhooks.failingSince}, v.first_failure_at) end`;
  // Disabled on a 410, or when a message's last attempt failed and the webhook has failed without
  // a success since disableBefore (5 days) or earlier: every message still gets its whole retry
  // schedule, also the first after a quiet spell of a webhook that failed long ago.
  const disable = sql`(v.gone or (v.final_failure and v.failures_after > 0 and (${failingSince}) <= ${value('disableBefore')}::timestamptz))`;
  const reason = sql`case when v.gone then 'The receiver answered 410 Gone'
      else 'Every delivery failed for 5 days (' || (${failures})::text || ' attempts in a row)' end`;
  const update = sql`update ${webhooks} set
        consecutive_failures = ${failures},
        failing_since = ${failingSince},
        last_triggered_at = greatest(${webhooks.lastTriggeredAt}, v.last_triggered_at),
        last_success_at = coalesce(v.last_success_at, ${webhooks.lastSuccessAt}),
        is_active = case when ${disable} then false else ${webhooks.isActive} end,
        disabled_reason = case when ${disable} and ${webhooks.isActive} then ${reason}
          else ${webhooks.disabledReason} end,
        updated_at = case when ${disable} and ${webhooks.isActive} then now()
          else ${webhooks.updatedAt} end
      from jsonb_to_recordset(${value('summaries')}::jsonb) as v(id text, last_triggered_at timestamptz,
        last_success_at timestamptz, failures_after integer, first_failure_at timestamptz,
        gone boolean, failed boolean, final_failure boolean)
      where ${webhooks.id} = v.id and (v.failed or v.gone
        or ${webhooks.consecutiveFailures} <> 0 or ${webhooks.failingSince} is not null
        or ${webhooks.lastTriggeredAt} is null
        or ${webhooks.lastTriggeredAt} < v.last_triggered_at - ${TIMESTAMPS_THROTTLE}
        or (v.last_success_at is not null and (${webhooks.lastSuccessAt} is null
          or ${webhooks.lastSuccessAt} < v.last_success_at - ${TIMESTAMPS_THROTTLE})))
      returning ${webhooks.id} as id, ${webhooks.isActive} as is_active`;
  return sql`
      with setting as (
        ${asyncCommit ? sql`select set_config('synchronous_commit', 'off', true)` : sql`select 1`}
      ),
      ${complete ? sql`completed as (${complete}),` : sql``}
      ${handoff ? sql`handed as (${handoff}),` : sql``}
      inserted as (
        insert into ${webhookDeliveries} (id, team_id, webhook_id, message_id, event, payload,
          response_status, response_body, success, attempt_count, duration_ms, error, created_at)
        select x.id, x.team_id, x.webhook_id, x.message_id, x.event, x.payload, x.response_status,
          x.response_body, x.success, x.attempt_count, x.duration_ms, x.error, x.created_at
        from setting, jsonb_to_recordset(${value('deliveries')}::jsonb) as x(id text, team_id text,
          webhook_id text, message_id text, event text, payload jsonb, response_status integer,
          response_body text, success boolean, attempt_count integer, duration_ms integer,
          error text, created_at timestamptz)
      )
      ${
        handoff
          ? sql`, updated as (${update})
      select id, is_active, false as handed, null::jsonb as data, null::integer as retry_count,
          null::timestamptz as webhook_updated_at, null::boolean as webhook_active
        from updated
      union all
      select h.id::text, null, true, h.data, h.retry_count, w.updated_at,
          coalesce(u.is_active, w.is_active)
        from handed h left join ${webhooks} w on w.id = h.data ->> 'webhookId'
          left join updated u on u.id = w.id`
          : update
      }`;
}

/**
 * recordAttempts' named statements, by asyncCommit and hand-off: without a completion, and per
 * completion (a completion and its queue's hand-off come in pairs, each built once).
 */
const plainRecordStatements = new Map<string, NamedStatement<RecordValues>>();
const completingRecordStatements = new WeakMap<SQL, Map<string, NamedStatement<RecordValues>>>();

/** The named statement of recordAttempts for these options, built on first use. */
function recordStatementFor(
  asyncCommit: boolean,
  complete: SQL | undefined,
  handoff: SQL | undefined,
): NamedStatement<RecordValues> {
  let statements = plainRecordStatements;
  if (complete) {
    statements = completingRecordStatements.get(complete) ?? new Map();
    completingRecordStatements.set(complete, statements);
  }
  const key = `${asyncCommit}:${handoff !== undefined}`;
  let statement = statements.get(key);
  if (!statement) {
    statement = new NamedStatement<RecordValues>(
      recordAttemptsSql(asyncCommit, complete, handoff, (name) => sql.placeholder(name)),
    );
    statements.set(key, statement);
  }
  return statement;
}
