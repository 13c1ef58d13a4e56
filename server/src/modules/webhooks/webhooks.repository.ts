import { and, desc, eq, getTableName, inArray, type SQL, sql } from 'drizzle-orm';
import type { Database, Executor } from '../../db/client.ts';
import { NamedStatement, poolOf, preparedPerExecutor, type StatementPart } from '../../db/named-statement.ts';
import { nextRowVersion } from '../../db/row-version.ts';
import { webhookDeliveries, webhookOutbox, webhooks } from '../../db/schema/index.ts';
import { STALE_BACKLOG_MIN_ROWS, statisticsAreStale } from '../../db/stale-statistics.ts';

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

/** findMany's statement, prepared once per database (or transaction) it runs on. */
const findManyStatement = preparedPerExecutor((db) =>
  db
    .select()
    .from(webhooks)
    .where(sql`${webhooks.id} = any(${sql.placeholder('ids')}::text[])`)
    .prepare('webhooks_find_many'),
);

/**
 * A claimed outbox row (webhook_outbox): one attempt of one message to one webhook, with its
 * webhook's `updatedAt` (as ms since the epoch) and `isActive` as the claiming statement saw them
 * (null: the webhook is gone). `claims` fences the claimant's writes to this claim (see
 * {@link OutboxSettlement}).
 */
export interface ClaimedAttempt {
  /** The outbox row's id (a bigint, as text). */
  id: string;
  webhookId: string;
  /** The webhook's team (the webhook's id for a row written before rows named their team). */
  teamId: string;
  /** The Standard Webhooks `webhook-id`, the same for every attempt of the message. */
  messageId: string;
  event: string;
  /** The event's JSON text, sent as the request body. */
  body: string;
  /** 1 for the message's first attempt. */
  attempt: number;
  /** Claims of this row so far, this one included (more than `attempt` after a worker died). */
  claims: number;
  webhook: { updatedAtMs: number; isActive: boolean } | null;
}

/**
 * A claim of due outbox rows: at most `limit`, in due order, leased for `leaseSeconds` (their
 * `leasedUntil`; rows whose lease has not lapsed are not due), skipping rows locked by other claimants and the webhooks in
 * `capped`, and taking at most `cap - inFlight[webhookId]` rows of each webhook and
 * `cap - teamInFlight[teamId]` of each team.
 */
export interface OutboxClaim {
  limit: number;
  leaseSeconds: number;
  cap: number;
  /** Attempts of each webhook this process already holds (absent: none). */
  inFlight: Record<string, number>;
  /** Attempts of each team this process already holds (absent: none); a team takes `cap` at most too. */
  teamInFlight: Record<string, number>;
  /** Webhooks whose rows are not even looked at (at their cap here). */
  capped: string[];
  /** Teams whose rows are not even looked at (at their cap here). */
  cappedTeams: string[];
}

/**
 * What a group of attempts does to their outbox rows, fenced to each claim (`id` and `claims`):
 * `finished` rows are deleted (their message is done: success, final failure, or webhook gone);
 * `retries` are rescheduled as attempt `attempt` after `delaySeconds`; `claim` claims rows in their
 * place in the same statement (a hand-off: no fetch a round trip later).
 */
export interface OutboxSettlement {
  finished: { id: string; claims: number }[];
  retries: { id: string; claims: number; attempt: number; delaySeconds: number }[];
  claim?: OutboxClaim | undefined;
}

/**
 * Previous secrets a webhook keeps (each until its own expiry), the newest: every one signs every
 * delivery, so without a bound a loop of rotations made a 14 KB signature header after 300 (a
 * receiver's 16 KB header limit refused every delivery after 1,200) and 40-64 ms of decryption
 * per attempt on the shared worker (review finding, session 14).
 */
export const PREVIOUS_SECRETS_KEPT = 3;

/** SQL for webhooks and their delivery records; every query is scoped by team. */
/** {@link webhookRepository.noActiveSubscriber}'s condition, built once. */
const NO_ACTIVE_SUBSCRIBER = sql`not exists (select 1 from ${webhooks}
    where ${webhooks.teamId} = any(${sql.placeholder('idleTeamIds')}::text[])
      and ${webhooks.isActive} and ${webhooks.events} && ${sql.placeholder('idleEvents')}::text[])`;
const NO_ACTIVE_SUBSCRIBER_KEY = 'webhooks.noActiveSubscriber';

export const webhookRepository = {
  /**
   * Inserts `row` unless its team already has `limit` webhooks (active or not); `undefined` then.
   * Counted and inserted under a per-team transaction lock, so concurrent creates cannot pass the
   * limit together.
   */
  async insertWithinLimit(db: Database, row: NewWebhookRow, limit: number): Promise<WebhookRow | undefined> {
    return db.transaction(async (tx) => {
      await tx.execute(sql`select pg_advisory_xact_lock(hashtext(${`webhooks:${row.teamId}`}))`);
      const [{ count } = { count: 0 }] = await tx
        .select({ count: sql<number>`count(*)::integer` })
        .from(webhooks)
        .where(eq(webhooks.teamId, row.teamId));
      if (count >= limit) return undefined;
      const [created] = await tx.insert(webhooks).values(row).returning();
      return created!;
    });
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
    return findManyStatement(db).execute({ ids: [...ids] });
  },

  async update(
    db: Executor,
    teamId: string,
    id: string,
    changes: WebhookChanges,
  ): Promise<WebhookRow | undefined> {
    const [row] = await db
      .update(webhooks)
      .set({ ...changes, updatedAt: nextRowVersion(webhooks.updatedAt) })
      .where(and(eq(webhooks.teamId, teamId), eq(webhooks.id, id)))
      .returning();
    return row;
  },

  /**
   * Rotates the secret of webhook `id` of `teamId` in ONE statement (two rotations at once both
   * take effect, each keeping the other's secret): `secretEncrypted` becomes the webhook's secret,
   * the one it replaces joins `previousSecrets` until `expiresAt`, and previous secrets past their
   * own expiry leave, as do all but the newest {@link PREVIOUS_SECRETS_KEPT}; `updatedAt` moves
   * (the delivery worker's kept rows are keyed by it). Ciphertexts listed in `unreadable` (ones the
   * caller found not to decrypt with the ENCRYPTION_KEY in use) leave too, the replaced one
   * included: they could not sign during the overlap.
   * @returns the updated row, undefined when there is no such webhook.
   */
  async rotateSecret(
    db: Executor,
    teamId: string,
    id: string,
    secretEncrypted: string,
    expiresAt: Date,
    unreadable: readonly string[] = [],
  ): Promise<WebhookRow | undefined> {
    const dropped = sql`${sql.param([...unreadable])}::text[]`;
    const [row] = await db
      .update(webhooks)
      .set({
        secretEncrypted,
        previousSecrets: sql`coalesce((select jsonb_agg(k.kept order by k.position) from (
            select kept, position from jsonb_array_elements(${webhooks.previousSecrets})
              with ordinality as e(kept, position)
            where (kept ->> 'expiresAt')::timestamptz > now()
              and not ((kept ->> 'secret') = any(${dropped}))
            order by position desc limit ${PREVIOUS_SECRETS_KEPT - 1}) k), '[]'::jsonb)
          || case when ${webhooks.secretEncrypted} = any(${dropped}) then '[]'::jsonb
             else jsonb_build_array(jsonb_build_object('secret', ${webhooks.secretEncrypted}, 'expiresAt', ${expiresAt.toISOString()}::text)) end`,
        updatedAt: nextRowVersion(webhooks.updatedAt),
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

  /**
   * The active webhooks of these teams subscribed to at least one of `events`, with the events they
   * subscribe to (the fan-out's query), locked `FOR KEY SHARE` until `db`'s transaction ends, in id
   * order. The lock is what the outbox rows' foreign key would take at their insert, taken before
   * the rows are chosen: a webhook whose delete is in progress is waited for and then skipped
   * (PostgreSQL re-checks a locked row that changed), and a delete that comes later waits for this
   * transaction (its cascade then removes the new rows). Read without it, a webhook deleted between
   * this read and the insert failed the insert on its foreign key, and with it the status change:
   * an email handed to its provider stayed `queued` for good, and a send answered 500 (review
   * finding, session 18). Key-share locks conflict only with deletes and key changes, not with
   * each other or with the dispatcher's updates.
   */
  activeSubscribers(
    db: Executor,
    teamIds: readonly string[],
    events: readonly string[],
  ): Promise<Pick<WebhookRow, 'id' | 'teamId' | 'events'>[]> {
    return db
      .select({ id: webhooks.id, teamId: webhooks.teamId, events: webhooks.events })
      .from(webhooks)
      .where(
        and(
          inArray(webhooks.teamId, [...teamIds]),
          eq(webhooks.isActive, true),
          sql`${webhooks.events} && ${sql.param([...events])}::text[]`,
        ),
      )
      .orderBy(webhooks.id)
      .for('key share');
  },

  /**
   * A condition, true when no active webhook of `teamIds` subscribes to any of `events` (the rows
   * {@link activeSubscribers} would find with one of those events), evaluated in the caller's
   * statement and snapshot: a part built once, its values the placeholders `idleTeamIds` and
   * `idleEvents` (StatementPart).
   */
  noActiveSubscriber(teamIds: readonly string[], events: readonly string[]): StatementPart {
    return {
      key: NO_ACTIVE_SUBSCRIBER_KEY,
      sql: NO_ACTIVE_SUBSCRIBER,
      values: { idleTeamIds: [...teamIds], idleEvents: [...events] },
    };
  },

  /**
   * Records attempts with ONE statement (one round trip, issue #11 throughput): inserts the
   * delivery records `rows` (they travel as one JSON parameter, `json_to_recordset`: far cheaper
   * to build than Drizzle's bound parameter per value, and read as `json`, not `jsonb`, which
   * PostgreSQL would first convert whole: 3.8 against 6 µs a record on this machine; a row's payload is its outbox row's body
   * when it names one, `outboxId` — it is not sent back — else its `payloadJson`, the request body
   * already serialised, else its `payload`) and applies the attempt `summaries` to their webhooks:
   * success resets `consecutiveFailures` and `failingSince`; failures add up and keep the first
   * failure's time; the webhook is disabled (`isActive=false`, `disabledReason`) on a 410 Gone, or
   * when a message's last attempt failed and the webhook has failed without a success since
   * `disableBefore` or earlier (issue #11: 5 days). A webhook whose attempts all succeeded, with no
   * failures to reset, is updated only when its `lastTriggeredAt` or `lastSuccessAt` lag more than
   * TIMESTAMPS_THROTTLE behind them.
   * A record whose webhook is gone (deleted while its attempt was out) is not inserted: the
   * statement locks the records' webhooks, once each (migration 0020 took out the per-record
   * foreign key); the test and redeliver endpoints look for their record afterwards.
   * With `outbox`, the same statement deletes the finished outbox rows, reschedules the retried
   * ones and claims rows in their place (see {@link OutboxSettlement}): the whole recording of a
   * group of attempts, atomic, in one round trip. With `asyncCommit`, the statement also sets
   * `synchronous_commit = off` for the rest of the transaction (`set_config(…, true)`).
   * Outside a transaction it runs as a named statement built once (NamedStatement: parsed and
   * planned once per connection, not on every group); in one, with its values inline.
   * @returns the outbox rows the statement claimed (none without `outbox.claim`).
   */
  async recordAttempts(
    db: Executor,
    rows: readonly (NewWebhookDeliveryRow & {
      createdAt: Date;
      payloadJson?: string | undefined;
      outboxId?: string | undefined;
    })[],
    summaries: readonly WebhookAttemptSummary[],
    disableBefore: Date,
    options: { asyncCommit?: boolean; outbox?: OutboxSettlement | undefined } = {},
  ): Promise<ClaimedAttempt[]> {
    const { outbox } = options;
    if (rows.length === 0 && summaries.length === 0 && !outbox) return [];
    const values: RecordValues = {
      deliveries: `[${rows.map(deliveryJson).join(',')}]`,
      recordedWebhookIds: [...new Set(rows.map((row) => row.webhookId))],
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
      finishedIds: (outbox?.finished ?? []).map((f) => f.id),
      finishedClaims: (outbox?.finished ?? []).map((f) => `${f.id}:${f.claims}`),
      retryIds: (outbox?.retries ?? []).map((r) => r.id),
      retries: JSON.stringify(
        (outbox?.retries ?? []).map((r) => ({
          id: r.id,
          claims: r.claims,
          attempt: r.attempt,
          delay: r.delaySeconds,
        })),
      ),
      ...claimValues(outbox?.claim),
    };
    const asyncCommit = options.asyncCommit ?? false;
    const perWebhook = outbox?.claim !== undefined && isCapping(outbox.claim);
    const pool = poolOf(db);
    let result: ClaimRow[];
    if (pool) {
      const key = `${asyncCommit}:${perWebhook}`;
      let statement = recordStatements.get(key);
      if (!statement) {
        statement = new NamedStatement<RecordValues>(
          recordAttemptsSql(asyncCommit, hiddenPlaceholder, perWebhook),
        );
        recordStatements.set(key, statement);
      }
      result = await statement.run(pool, values);
    } else {
      // In a transaction (the test and redeliver endpoints, a group commit's fallback): Drizzle on
      // the transaction's connection, the values in place of the placeholders.
      // Each value one bound parameter (Drizzle would spread an array into a list).
      const query = recordAttemptsSql(
        asyncCommit,
        (key, type) => sql`${sql.param(values[key])}::${sql.raw(type)}`,
        perWebhook,
      );
      result = ((await db.execute(query)) as unknown as { rows: ClaimRow[] }).rows;
    }
    return result.map(claimedAttempt);
  },

  /**
   * Claims due outbox rows (see {@link OutboxClaim}) in ONE named statement on the database (not
   * in a transaction: the claim commits at once).
   * @returns the claimed rows in the order they were written, each with its webhook's version as
   *   the statement saw it.
   */
  async claimAttempts(db: Executor, claim: OutboxClaim): Promise<ClaimedAttempt[]> {
    const pool = poolOf(db);
    if (!pool) throw new Error('claimAttempts: runs on the database, not in a transaction');
    const perWebhook = isCapping(claim);
    let statement = claimStatements.get(perWebhook);
    if (!statement) {
      statement =
        new NamedStatement<ClaimValues>(sql`with handed as (${claimSql(hiddenPlaceholder, sql`true`, perWebhook)})
      select h.id::text as id, h.webhook_id, h.team_key, h.message_id, h.event, h.body, h.attempt, h.claims,
          ${UPDATED_MS} as webhook_updated_ms, w.is_active as webhook_active
        from handed h left join ${webhooks} w on w.id = h.webhook_id
        order by h.id`);
      claimStatements.set(perWebhook, statement);
    }
    const result = await statement.run<ClaimRow>(pool, claimValues(claim));
    return result.map(claimedAttempt);
  },

  /**
   * Moves the lease of the outbox rows `held` (fenced to their claims) to `leaseSeconds` from now:
   * the dispatcher's heartbeat, so an attempt that takes long is not claimed again meanwhile.
   */
  async extendLeases(
    db: Executor,
    held: readonly { id: string; claims: number }[],
    leaseSeconds: number,
  ): Promise<void> {
    if (held.length === 0) return;
    await db.execute(sql`update ${webhookOutbox} o
      set leased_until = now() + make_interval(secs => ${leaseSeconds})
      from jsonb_to_recordset(${JSON.stringify(held)}::jsonb) as h(id bigint, claims integer)
      where o.id = h.id and o.claims = h.claims`);
  },

  /**
   * Gives back claimed rows whose attempt was not started (a stopping worker's rows claimed
   * ahead): claimable again at once, and their claim not counted (MAX_LOST_CLAIMS counts only
   * claims whose attempt was lost). Fenced to their claims.
   */
  async releaseClaims(db: Executor, rows: readonly { id: string; claims: number }[]): Promise<void> {
    if (rows.length === 0) return;
    await db.execute(sql`update ${webhookOutbox} o
      set leased_until = null, claims = o.claims - 1
      from jsonb_to_recordset(${JSON.stringify(rows.map(({ id, claims }) => ({ id, claims })))}::jsonb)
        as r(id bigint, claims integer)
      where o.id = r.id and o.claims = r.claims`);
  },

  /**
   * ANALYZEs `webhook_outbox` when its due rows are ten times or more the rows PostgreSQL last
   * counted in it (`pg_class.reltuples`, from its last ANALYZE or VACUUM) and at least 500
   * (statisticsAreStale). Why: the claim and recording statements keep one generic plan per
   * connection (hiddenPlaceholder), made from the table as it was; one made while the outbox was
   * empty reads and sorts the whole backlog on every claim (161 ms instead of 0.4 ms with 300,000
   * rows due) until autovacuum analyzes the table. An ANALYZE invalidates those plans. The due rows
   * are counted only up to ten times the old count (a bounded read). Only the planned columns are
   * analyzed, not the bodies.
   * @returns whether it analyzed.
   */
  async refreshStaleStatistics(db: Executor): Promise<boolean> {
    const { rows } = (await db.execute(sql`with planned as (
        select greatest(c.reltuples, 0)::float8 as n from pg_class c
        where c.oid = ${getTableName(webhookOutbox)}::regclass)
      select (select n from planned) as estimated,
        (select count(*)::int from (select 1 from ${webhookOutbox} o where o.due_at <= now()
          limit (select greatest(${STALE_BACKLOG_MIN_ROWS}, ceil(n * 10))::int from planned)) d) as actual`)) as unknown as {
      rows: { estimated: number; actual: number }[];
    };
    const [counts] = rows;
    if (!counts || !statisticsAreStale(counts.actual, counts.estimated)) return false;
    await db.execute(sql`analyze ${webhookOutbox} (id, webhook_id, due_at, leased_until)`);
    return true;
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

  /**
   * Takes the number of a manual attempt (redeliver) of a message to a webhook: one past the
   * highest recorded, and at least the attempt its outbox row (a scheduled retry) waits to make,
   * which then moves one on, so no two records share a number (review finding, session 15: a
   * redelivery and the retry after it were both recorded as attempt 2).
   */
  async takeManualAttempt(db: Executor, webhookId: string, messageId: string): Promise<number> {
    // One statement: the number taken and the retry's row moved on together.
    const result = (await db.execute(sql`
      with taken as (
        select greatest(
          (select coalesce(max(${webhookDeliveries.attemptCount}), 0) + 1 from ${webhookDeliveries}
            where ${webhookDeliveries.webhookId} = ${webhookId} and ${webhookDeliveries.messageId} = ${messageId}),
          (select coalesce(max(${webhookOutbox.attempt}), 0) from ${webhookOutbox}
            where ${webhookOutbox.webhookId} = ${webhookId} and ${webhookOutbox.messageId} = ${messageId})
        ) as attempt
      ), moved as (
        update ${webhookOutbox} set attempt = (select attempt from taken) + 1
        where ${webhookOutbox.webhookId} = ${webhookId} and ${webhookOutbox.messageId} = ${messageId}
          and ${webhookOutbox.attempt} <= (select attempt from taken)
      )
      select attempt from taken`)) as unknown as { rows: { attempt: number }[] };
    return result.rows[0]!.attempt;
  },
};

/**
 * One delivery record as the JSON object `recordAttempts` reads (snake_case columns): its payload
 * taken from outbox row `outboxId` when it names one (not sent at all), else `payloadJson` spliced
 * in (the exact body sent), else `payload` serialised.
 */
function deliveryJson(
  r: NewWebhookDeliveryRow & {
    createdAt: Date;
    payloadJson?: string | undefined;
    outboxId?: string | undefined;
  },
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
  if (r.outboxId !== undefined) return `${fields.slice(0, -1)},"outbox_id":${r.outboxId}}`;
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

/**
 * A claimed row's webhook version, `w.updated_at` as ms since the epoch: a float8 the driver reads
 * as a number (0.06 µs), where a timestamp is a Date parsed from text for every row (postgres-date:
 * 0.6-0.9 µs on this machine). Exact: the column keeps milliseconds.
 */
const UPDATED_MS = sql.raw('(extract(epoch from w.updated_at) * 1000)::float8');

/**
 * Where a statement's value `key` of SQL type `type` goes: a placeholder of a named statement, or
 * the value itself (a bound parameter) in a transaction.
 */
type ValueAt<K extends string> = (key: K, type: string) => SQL;

/**
 * A named statement's value as a scalar subquery, `(select $n::type)`: the planner never sees it,
 * so the plans PostgreSQL makes with the values (custom plans) cost the same as the plan without
 * them (the generic plan), and after its first five executions on a connection PostgreSQL keeps
 * the generic plan (plancache.c choose_custom_plan: a custom plan also carries its planning's
 * cost). With the values visible, the recorder's statement cost less with them (a known `limit`,
 * known array sizes) and was planned anew on every execution: ~20 % of its PostgreSQL CPU, about
 * 10 µs per delivery (issue #11 bench, perf). The type is cast inside the subquery: cast outside,
 * it would parse the text of an array or a jsonb value again for every row that reads it.
 */
function hiddenPlaceholder(key: string, type: string): SQL {
  // The cast after the subquery (a no-op) makes `any(…)` and `all(…)` read it as an array, not as
  // the rows of a subquery (`x = any((select …))` is the subquery form).
  return sql`(select ${sql.placeholder(key)}::${sql.raw(type)})::${sql.raw(type)}`;
}

/**
 * now() as the outbox's timestamp(3) columns store it, rounded to the millisecond: a row written
 * this millisecond is due (its `due_at`, now() at the insert, may round up past a later now(), and
 * a claim right after the insert missed it until the next poll).
 */
const NOW_MS = sql.raw('now()::timestamp(3) with time zone');

/** The placeholder values of {@link claimSql}. */
type ClaimValues = {
  claimLimit: number;
  claimLease: number;
  claimCap: number;
  claimInFlight: string;
  claimTeamInFlight: string;
  claimCapped: string[];
  claimCappedTeams: string[];
};

/** The values of recordAttempts' statement: its placeholders. */
type RecordValues = {
  deliveries: string;
  /** The records' webhooks, each once (locked by the statement, see recordAttemptsSql). */
  recordedWebhookIds: string[];
  summaries: string;
  disableBefore: string;
  finishedIds: string[];
  finishedClaims: string[];
  retries: string;
  retryIds: string[];
} & ClaimValues;

/** A claimed outbox row as the claim statements return it. */
type ClaimRow = {
  id: string;
  webhook_id: string;
  team_key: string;
  message_id: string;
  event: string;
  body: string;
  attempt: number;
  claims: number;
  webhook_updated_ms: number | null;
  webhook_active: boolean | null;
};

/** A claim statement's row as the dispatcher holds it. */
function claimedAttempt(row: ClaimRow): ClaimedAttempt {
  return {
    id: row.id,
    webhookId: row.webhook_id,
    teamId: row.team_key,
    messageId: row.message_id,
    event: row.event,
    body: row.body,
    attempt: row.attempt,
    claims: row.claims,
    webhook:
      row.webhook_updated_ms !== null
        ? { updatedAtMs: row.webhook_updated_ms, isActive: row.webhook_active === true }
        : null,
  };
}

/** The placeholder values of a claim (none claimed without one). */
function claimValues(claim: OutboxClaim | undefined): ClaimValues {
  return {
    claimLimit: claim?.limit ?? 0,
    claimLease: claim?.leaseSeconds ?? 0,
    claimCap: claim?.cap ?? 0,
    claimInFlight: JSON.stringify(claim?.inFlight ?? {}),
    claimTeamInFlight: JSON.stringify(claim?.teamInFlight ?? {}),
    claimCapped: claim?.capped ?? [],
    claimCappedTeams: claim?.cappedTeams ?? [],
  };
}

/**
 * The claim of due outbox rows (see {@link OutboxClaim}) as an `update … returning` (for a CTE):
 * the first `claimLimit` due rows in due order, rows locked by another claimant skipped, the
 * webhooks of `claimCapped` not looked at, at most `claimCap - claimInFlight[webhook]` of each
 * webhook and `claimCap - claimTeamInFlight[team]` of each team taken; each taken row's `leased_until` moves to the end of its lease and its `claims` up
 * (no indexed column written: an update in place, see db/schema `webhookOutbox`). `exclude` (an SQL
 * condition on the candidate row `w`) keeps rows out.
 * `value(key)` is where each value goes (a placeholder, or the value itself).
 */
function claimSql(value: ValueAt<keyof ClaimValues>, exclude: SQL = sql`true`, perWebhook = false): SQL {
  return sql`update ${webhookOutbox} o
      set leased_until = now() + make_interval(secs => ${value('claimLease', 'double precision')}),
        claims = o.claims + 1
      where o.id = any(array(
        select r.id from (
          select c.id, c.webhook_id, c.team_key, row_number() over (partition by c.webhook_id
              order by c.due_at, c.id) as position,
            row_number() over (partition by c.team_key order by c.due_at, c.id) as team_position
          from (${perWebhook ? perWebhookCandidates(value, exclude) : dueOrderCandidates(value, exclude)}) c
        ) r
        where r.position <= ${value('claimCap', 'integer')}
            - coalesce((${value('claimInFlight', 'jsonb')} ->> r.webhook_id)::integer, 0)
          and r.team_position <= ${value('claimCap', 'integer')}
            - coalesce((${value('claimTeamInFlight', 'jsonb')} ->> r.team_key)::integer, 0)))
      returning o.id, o.webhook_id, coalesce(o.team_id, o.webhook_id) as team_key, o.message_id,
        o.event, o.body, o.attempt, o.claims`;
}

/**
 * A claim's candidate rows when no webhook or team is capped: the first `claimLimit` due rows in
 * due order (webhook_outbox_due_idx), locked, skipping rows locked by another claimant.
 */
function dueOrderCandidates(value: ValueAt<keyof ClaimValues>, exclude: SQL): SQL {
  return sql`select w.id, w.webhook_id, coalesce(w.team_id, w.webhook_id) as team_key, w.due_at
      from ${webhookOutbox} w
      where w.due_at <= ${NOW_MS} and (w.leased_until is null or w.leased_until < ${NOW_MS})
        -- Not "<> all(…)": with the array unknown to the planner (a generic plan) and few
        -- webhooks in the table, PostgreSQL estimated that almost no row passes it and chose
        -- to read and sort the whole outbox on every claim; a subquery counts as half.
        and not (w.webhook_id in (select unnest(${value('claimCapped', 'text[]')})))
        and not (coalesce(w.team_id, w.webhook_id) in (select unnest(${value('claimCappedTeams', 'text[]')})))
        and (${exclude})
      order by w.due_at
      limit ${value('claimLimit', 'integer')}
      for update skip locked`;
}

/**
 * A claim's candidate rows when some webhooks or teams are capped: webhook by webhook. The due
 * order scan of {@link dueOrderCandidates} read every due row of a capped webhook before the
 * others' (its backlog comes first): 21-58 ms per claim with 100,000 rows waiting, 200-300 ms with
 * 500,000, every 50 ms while the dispatcher is busy (review finding, session 15). Here the outbox's
 * webhooks are found by a skip scan of webhook_outbox_webhook_due_idx (one index descent each), the
 * capped ones and those of capped teams are passed over, and each other webhook gives its first
 * due rows (at most what its cap leaves and `claimLimit`), locked; the first `claimLimit` of those
 * in due order are the candidates. The cost is a descent per webhook with rows in the outbox and
 * the rows looked at, whatever the capped backlogs.
 */
function perWebhookCandidates(value: ValueAt<keyof ClaimValues>, exclude: SQL): SQL {
  return sql`with recursive hooks(webhook_id) as (
        (select w.webhook_id from ${webhookOutbox} w order by w.webhook_id limit 1)
        union all
        select (select w.webhook_id from ${webhookOutbox} w where w.webhook_id > h.webhook_id
            order by w.webhook_id limit 1)
          from hooks h where h.webhook_id is not null
      )
      select x.id, x.webhook_id, x.team_key, x.due_at
      from hooks h
        left join ${webhooks} k on k.id = h.webhook_id
        cross join lateral (
          select w.id, w.webhook_id, coalesce(w.team_id, w.webhook_id) as team_key, w.due_at
          from ${webhookOutbox} w
          where w.webhook_id = h.webhook_id
            and w.due_at <= ${NOW_MS} and (w.leased_until is null or w.leased_until < ${NOW_MS})
            and not (coalesce(w.team_id, w.webhook_id) in (select unnest(${value('claimCappedTeams', 'text[]')})))
            and (${exclude})
          order by w.due_at
          limit greatest(0, least(${value('claimLimit', 'integer')}, ${value('claimCap', 'integer')}
            - coalesce((${value('claimInFlight', 'jsonb')} ->> h.webhook_id)::integer, 0)))
          for update of w skip locked
        ) x
      where h.webhook_id is not null
        and not (h.webhook_id in (select unnest(${value('claimCapped', 'text[]')})))
        and (k.team_id is null or not (k.team_id in (select unnest(${value('claimCappedTeams', 'text[]')}))))
      order by x.due_at
      limit ${value('claimLimit', 'integer')}`;
}

/**
 * recordAttempts' statement, with `value(key)` where each value goes (a placeholder for a named
 * statement, the value itself in a transaction). The outbox's delete, reschedule and claim, the
 * insert and the webhooks' update are data-modifying CTEs (always run, whatever the final select
 * reads; all see the snapshot of the statement's start: the insert reads the bodies of the rows
 * the delete removes); the setting is a plain CTE, run because the insert reads it.
 */
function recordAttemptsSql(
  asyncCommit: boolean,
  value: ValueAt<keyof RecordValues>,
  perWebhook: boolean,
): SQL {
  const failures = sql`case when v.last_success_at is not null then v.failures_after
      else ${webhooks.consecutiveFailures} + v.failures_after end`;
  const failingSince = sql`case when v.last_success_at is not null then v.first_failure_at
      else coalesce(${webhooks.failingSince}, v.first_failure_at) end`;
  // Disabled on a 410, or when a message's last attempt failed and the webhook has failed without
  // a success since disableBefore (5 days) or earlier: every message still gets its whole retry
  // schedule, also the first after a quiet spell of a webhook that failed long ago.
  const disable = sql`(v.gone or (v.final_failure and v.failures_after > 0 and (${failingSince}) <= ${value('disableBefore', 'timestamptz')}))`;
  const reason = sql`case when v.gone then 'The receiver answered 410 Gone'
      else 'Every delivery failed for 5 days (' || (${failures})::text || ' attempts in a row)' end`;
  return sql`
      with setting as (
        ${asyncCommit ? sql`select set_config('synchronous_commit', 'off', true)` : sql`select 1`}
      ),
      finished as (
        delete from ${webhookOutbox} o
        where o.id = any(${value('finishedIds', 'bigint[]')})
          and (o.id::text || ':' || o.claims::text) = any(${value('finishedClaims', 'text[]')})
        returning o.id, o.body
      ),
      retried as (
        update ${webhookOutbox} o
        set attempt = r.attempt, due_at = now() + make_interval(secs => r.delay), leased_until = null
        from jsonb_to_recordset(${value('retries', 'jsonb')}) as r(id bigint, claims integer,
          attempt integer, delay double precision)
        where o.id = any(${value('retryIds', 'bigint[]')}) and o.id = r.id and o.claims = r.claims
        returning o.id, o.body
      ),
      handed as (${claimSql(
        value,
        // Never the statement's own rows (one whose lease lapsed would be claimed, and its delete
        // or reschedule skipped: PostgreSQL applies one change per row and statement).
        sql`w.id <> all(${value('finishedIds', 'bigint[]')}) and w.id <> all(${value('retryIds', 'bigint[]')})`,
        perWebhook,
      )}),
      alive as (
        -- The records' webhooks, each locked once against a delete until this statement commits
        -- (migration 0020: where the foreign key checked every record with a query of its own). A
        -- webhook deleted first is not here, and its records are not written (a worker's attempt
        -- to a webhook deleted meanwhile, whose rows went with it; a test or redelivery, whose
        -- caller then answers 404); a delete that comes later waits, and its trigger deletes them.
        select k.id from ${webhooks} k
        where k.id = any(${value('recordedWebhookIds', 'text[]')})
        for key share
      ),
      inserted as (
        insert into ${webhookDeliveries} (id, team_id, webhook_id, message_id, event, payload,
          response_status, response_body, success, attempt_count, duration_ms, error, created_at)
        select r.id, r.team_id, r.webhook_id, r.message_id, r.event, r.payload_found, r.response_status,
          r.response_body, r.success, r.attempt_count, r.duration_ms, r.error, r.created_at
        from (
          select x.*,
            -- The body of the row this statement deletes or reschedules (a join, not a look-up per
            -- record); one fenced out (claimed again meanwhile) is looked up. Kept as the text sent.
            coalesce(x.payload::text, b.body,
              (select o.body from ${webhookOutbox} o where o.id = x.outbox_id)) as payload_found
          from setting, json_to_recordset(${value('deliveries', 'json')}) as x(id text, team_id text,
            webhook_id text, message_id text, event text, payload json, outbox_id bigint,
            response_status integer, response_body text, success boolean, attempt_count integer,
            duration_ms integer, error text, created_at timestamptz)
            left join (select id, body from finished union all select id, body from retried) b
              on b.id = x.outbox_id
          where x.webhook_id = any(array(select id from alive))
        ) r
        -- Nor does one whose row is gone (its lease lapsed; another worker attempted, recorded and
        -- deleted it, so this attempt was a repeat): a record without its payload read as null and
        -- broke the history and redeliver (review finding, session 14).
        where r.payload_found is not null
      ),
      updated as (
        update ${webhooks} set
          consecutive_failures = ${failures},
          failing_since = ${failingSince},
          last_triggered_at = greatest(${webhooks.lastTriggeredAt}, v.last_triggered_at),
          last_success_at = coalesce(v.last_success_at, ${webhooks.lastSuccessAt}),
          is_active = case when ${disable} then false else ${webhooks.isActive} end,
          disabled_reason = case when ${disable} and ${webhooks.isActive} then ${reason}
            else ${webhooks.disabledReason} end,
          updated_at = case when ${disable} and ${webhooks.isActive} then ${nextRowVersion(webhooks.updatedAt)}
            else ${webhooks.updatedAt} end
        from jsonb_to_recordset(${value('summaries', 'jsonb')}) as v(id text, last_triggered_at timestamptz,
          last_success_at timestamptz, failures_after integer, first_failure_at timestamptz,
          gone boolean, failed boolean, final_failure boolean)
        -- Through alive, read whole once (an array, an init plan) before this update changes the same rows:
        -- a row the statement had changed could no longer be locked by it, and its records were
        -- left out.
        where ${webhooks.id} = v.id and ${webhooks.id} = any(array(select id from alive))
          and (v.failed or v.gone
          or ${webhooks.consecutiveFailures} <> 0 or ${webhooks.failingSince} is not null
          or ${webhooks.lastTriggeredAt} is null
          or ${webhooks.lastTriggeredAt} < v.last_triggered_at - ${TIMESTAMPS_THROTTLE}
          or (v.last_success_at is not null and (${webhooks.lastSuccessAt} is null
            or ${webhooks.lastSuccessAt} < v.last_success_at - ${TIMESTAMPS_THROTTLE})))
        returning ${webhooks.id} as id, ${webhooks.isActive} as is_active
      )
      select h.id::text as id, h.webhook_id, h.team_key, h.message_id, h.event, h.body, h.attempt, h.claims,
          ${UPDATED_MS} as webhook_updated_ms, coalesce(u.is_active, w.is_active) as webhook_active
        from handed h left join ${webhooks} w on w.id = h.webhook_id
          left join updated u on u.id = w.id
        order by h.id`;
}

/** recordAttempts' named statements, by asyncCommit and claim variant (built on first use). */
const recordStatements = new Map<string, NamedStatement<RecordValues>>();
/** claimAttempts' named statements, by claim variant (built on first use). */
const claimStatements = new Map<boolean, NamedStatement<ClaimValues>>();

/** Whether `claim` passes over capped webhooks or teams: it is then made webhook by webhook. */
function isCapping(claim: OutboxClaim): boolean {
  return claim.capped.length > 0 || claim.cappedTeams.length > 0;
}
