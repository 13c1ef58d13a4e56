import { and, asc, count, desc, eq, gte, ilike, lt, lte, or, type SQL, sql } from 'drizzle-orm';
import type { Executor } from '../../db/client.ts';
import { containsPattern } from '../../db/like-pattern.ts';
import { NamedStatement, poolOf, preparedPerExecutor, type StatementPart } from '../../db/named-statement.ts';
import { emailEvents, emailLogs } from '../../db/schema/index.ts';
import { newId } from '../../ids.ts';
import { EMAIL_STATUSES, type EmailStatus, STATUS_TIMESTAMP } from './email-status.ts';
import type { LogListQuery } from './emails.schema.ts';

export type EmailLogRow = typeof emailLogs.$inferSelect;
export type EmailEventRow = typeof emailEvents.$inferSelect;
/** What the accept path writes for a new email; every other column takes its default. */
export type NewEmailLog = Pick<
  typeof emailLogs.$inferInsert,
  | 'id'
  | 'teamId'
  | 'templateId'
  | 'templateName'
  | 'templateVersionId'
  | 'adapterId'
  | 'apiKeyId'
  | 'toAddresses'
  | 'fromAddress'
  | 'subject'
  | 'variables'
  | 'status'
  | 'jobId'
  | 'hasPdfAttachment'
>;

/** A history row to append (`detail` defaults to {}, `occurredAt` to now, `id` to a new one). */
export interface NewEmailEvent {
  id?: string;
  teamId: string;
  emailId: string;
  status: EmailStatus;
  detail?: Record<string, unknown>;
  occurredAt?: Date;
}

/**
 * One email's move to `status`, allowed only from the statuses in `from`. Optional fields are
 * written only when given (`null` clears them).
 */
export interface TransitionRow {
  id: string;
  teamId: string;
  status: EmailStatus;
  from: readonly EmailStatus[];
  at: Date;
  providerMessageId?: string | null;
  errorMessage?: string | null;
  attemptCount?: number;
}

/**
 * `email_logs.id = any(ids)`, added beside a join on `jsonb_to_recordset(…)`: PostgreSQL
 * estimates such a function at 100 rows whatever it holds, and joined to `email_logs` of a few
 * thousand rows it chose a hash join over a sequential scan of the whole table (measured: 6-8 ms
 * per group of 10-15 emails with 4,000 logs). With the ids beside it (their values known when the
 * statement is planned), it looks each email up in the primary key.
 */
function byIds(ids: readonly string[]): SQL {
  // One array parameter (a list of parameters would hit PostgreSQL's 65,535 for a large call).
  return idIn(sql`${sql.param(distinct(ids))}`);
}

/** {@link byIds} with the array given as SQL (a bound parameter or a placeholder). */
function idIn(ids: SQL): SQL {
  return sql`${emailLogs.id} = any(${ids}::text[])`;
}

/** `ids` without repeats, in first-seen order. */
function distinct(ids: readonly string[]): string[] {
  return [...new Set(ids)];
}

/**
 * The values of the transition statement ({@link transitionsUpdate}) that vary from call to call:
 * the moves and the history rows, each as one JSON parameter, and their emails' ids (byIds).
 */
interface TransitionValues {
  transitions: string;
  transitionIds: string[];
  events: string;
  eventEmailIds: string[];
}

/** How a builder puts value `key` into its statement: a bound parameter now, or a placeholder. */
type ValueAt = (key: keyof TransitionValues) => SQL;

/** {@link ValueAt} that binds `values` in place (a statement built for one call). */
function bound(values: Partial<TransitionValues>): ValueAt {
  return (key) => sql`${sql.param(values[key])}`;
}

/** {@link ValueAt} that leaves a placeholder (a statement built once, see NamedStatement). */
const placeholder: ValueAt = (key) => sql`${sql.placeholder(key)}`;

/** The history rows `rows` as the events insert reads them. */
function eventValues(rows: readonly NewEmailEvent[]): Pick<TransitionValues, 'events' | 'eventEmailIds'> {
  const source = rows.map((row) => ({
    id: row.id ?? newId('emailEvent'),
    team_id: row.teamId,
    email_id: row.emailId,
    status: row.status,
    detail: row.detail ?? {},
    occurred_at: row.occurredAt?.toISOString() ?? null,
  }));
  return { events: JSON.stringify(source), eventEmailIds: distinct(rows.map((row) => row.emailId)) };
}

/** The moves `rows` and history rows `events` as {@link transitionsUpdate} reads them. */
function transitionValues(
  rows: readonly TransitionRow[],
  events: readonly NewEmailEvent[],
): TransitionValues {
  const source = rows.map((row) => ({
    id: row.id,
    team_id: row.teamId,
    status: row.status,
    from: row.from,
    at: row.at.toISOString(),
    set_provider_message_id: row.providerMessageId !== undefined,
    provider_message_id: row.providerMessageId ?? null,
    set_error_message: row.errorMessage !== undefined,
    error_message: row.errorMessage ?? null,
    attempt_count: row.attemptCount ?? null,
  }));
  return {
    transitions: JSON.stringify(source),
    transitionIds: distinct(rows.map((row) => row.id)),
    ...eventValues(events),
  };
}

/**
 * The statement of {@link emailRepository.insertEvents}: the rows travel as one JSON parameter
 * (`events`, see eventValues); a row whose email is not in its stated team is left out.
 */
function eventsInsert(value: ValueAt, onlyIf: SQL = sql`true`): SQL {
  return sql`
    insert into ${emailEvents} (id, team_id, email_id, status, detail, occurred_at)
    select v.id, v.team_id, v.email_id, v.status::email_status, v.detail, coalesce(v.occurred_at, now())
    from jsonb_to_recordset(${value('events')}::jsonb)
      as v(id text, team_id text, email_id text, status text, detail jsonb, occurred_at timestamptz)
    join ${emailLogs} on ${emailLogs.id} = v.email_id and ${emailLogs.teamId} = v.team_id
      and ${idIn(value('eventEmailIds'))}
    where ${onlyIf}
    returning 1 as one`;
}

/** The status timestamps a move sets: its status's column, only when still empty. */
const STATUS_TIMESTAMP_SETS = Object.fromEntries(
  EMAIL_STATUSES.map((status) => {
    const column = emailLogs[STATUS_TIMESTAMP[status]];
    return [
      STATUS_TIMESTAMP[status],
      sql`case when v.status = ${status} then coalesce(${column}, v.at) else ${column} end`,
    ];
  }).filter(([name]) => name !== 'createdAt'),
);

/**
 * The UPDATE of {@link emailRepository.applyTransitions} before its RETURNING clause (see there for
 * `options`), its varying values (TransitionValues) put in by `value`; the history insert only
 * `withEvents`.
 */
function transitionsUpdate(
  db: Executor,
  value: ValueAt,
  withEvents: boolean,
  options: { complete?: SQL | undefined; onlyIf?: SQL | undefined },
) {
  const onlyIf = options.onlyIf ?? sql`true`;
  // A data-modifying CTE runs whether or not the main statement reads it.
  const history = db.$with('history', { one: sql<number>`1` }).as(eventsInsert(value, onlyIf));
  const done = options.complete && db.$with('done', { id: sql<string>`id` }).as(options.complete);
  const ctes = [...(withEvents ? [history] : []), ...(done ? [done] : [])];
  return (ctes.length > 0 ? db.with(...ctes) : db)
    .update(emailLogs)
    .set({
      status: sql`v.status::email_status`,
      ...STATUS_TIMESTAMP_SETS,
      providerMessageId: sql`case when v.set_provider_message_id then v.provider_message_id else ${emailLogs.providerMessageId} end`,
      errorMessage: sql`case when v.set_error_message then v.error_message else ${emailLogs.errorMessage} end`,
      attemptCount: sql`coalesce(v.attempt_count, ${emailLogs.attemptCount})`,
      updatedAt: sql`v.at`,
    })
    .from(
      sql`jsonb_to_recordset(${value('transitions')}::jsonb) as v(id text, team_id text, status text, "from" text[], at timestamptz, set_provider_message_id boolean, provider_message_id text, set_error_message boolean, error_message text, attempt_count integer)`,
    )
    .where(
      and(
        eq(emailLogs.id, sql`v.id`),
        eq(emailLogs.teamId, sql`v.team_id`),
        idIn(value('transitionIds')),
        sql`${emailLogs.status}::text = any(v."from")`,
        onlyIf,
      ),
    );
}

/** findLogs's statement, prepared once per database (or transaction) it runs on. */
const findLogsStatement = preparedPerExecutor((db) =>
  db
    .select()
    .from(emailLogs)
    .where(idIn(sql`${sql.placeholder('ids')}`))
    .prepare('email_logs_find_logs'),
);

/**
 * The statements of {@link emailRepository.applyTransitionsReturningIds}, built once per shape
 * (history or not, and the keys of its completion and condition parts).
 */
const transitionStatements = new Map<string, NamedStatement<Record<string, unknown>>>();

/** The columns of a log list item (logs.service `presentLogListItem`). */
const LOG_LIST_COLUMNS = {
  id: emailLogs.id,
  templateId: emailLogs.templateId,
  templateName: emailLogs.templateName,
  toAddresses: emailLogs.toAddresses,
  subject: emailLogs.subject,
  status: emailLogs.status,
  createdAt: emailLogs.createdAt,
  sentAt: emailLogs.sentAt,
};

/** A log as a list shows it. */
export type EmailLogListRow = Pick<EmailLogRow, keyof typeof LOG_LIST_COLUMNS>;

/** SQL for email logs and their status history; every query is scoped by team. */
export const emailRepository = {
  /**
   * Inserts queued email logs with ONE statement (the group-commit accept path): the rows travel
   * as one JSON parameter, unpacked by `jsonb_to_recordset`, which costs far less to build than a
   * bound parameter per value. Columns not listed take their defaults, so `createdAt` is the
   * transaction's `now()` for every row.
   */
  async insertLogs(db: Executor, rows: NewEmailLog[]): Promise<void> {
    if (rows.length === 0) return;
    const json = JSON.stringify(
      rows.map((r) => ({
        id: r.id,
        team_id: r.teamId,
        template_id: r.templateId,
        template_name: r.templateName,
        template_version_id: r.templateVersionId,
        adapter_id: r.adapterId,
        api_key_id: r.apiKeyId,
        to_addresses: r.toAddresses,
        from_address: r.fromAddress,
        subject: r.subject,
        variables: r.variables,
        status: r.status,
        job_id: r.jobId,
        // Issue #12: only set when true (absent → false), so PDF-less rows carry nothing more.
        ...(r.hasPdfAttachment ? { has_pdf_attachment: true } : {}),
      })),
    );
    await db.execute(sql`
      insert into email_logs (id, team_id, template_id, template_name, template_version_id, adapter_id,
        api_key_id, to_addresses, from_address, subject, variables, status, job_id, has_pdf_attachment)
      select id, team_id, template_id, template_name, template_version_id, adapter_id,
        api_key_id, to_addresses, from_address, subject, variables, status::email_status, job_id,
        coalesce(has_pdf_attachment, false)
      from jsonb_to_recordset(${json}::jsonb) as x(id text, team_id text, template_id text,
        template_name text, template_version_id text, adapter_id text, api_key_id text,
        to_addresses text[], from_address text, subject text, variables jsonb, status text, job_id text,
        has_pdf_attachment boolean)`);
  },

  async insertEvent(
    db: Executor,
    row: {
      teamId: string;
      emailId: string;
      status: EmailStatus;
      detail?: Record<string, unknown>;
      occurredAt?: Date;
    },
  ): Promise<void> {
    await db.insert(emailEvents).values({ id: newId('emailEvent'), detail: {}, ...row });
  },

  async findLog(db: Executor, teamId: string, id: string): Promise<EmailLogRow | undefined> {
    const [row] = await db
      .select()
      .from(emailLogs)
      .where(and(eq(emailLogs.teamId, teamId), eq(emailLogs.id, id)));
    return row;
  },

  events(db: Executor, teamId: string, emailId: string): Promise<EmailEventRow[]> {
    return db
      .select()
      .from(emailEvents)
      .where(and(eq(emailEvents.teamId, teamId), eq(emailEvents.emailId, emailId)))
      .orderBy(asc(emailEvents.occurredAt), asc(emailEvents.id));
  },

  /**
   * A page of the team's logs with only the columns a list shows ({@link EmailLogListRow}): not the
   * variables, up to 256 KB a row, which 100 rows of a page read, parsed and dropped (review
   * finding, session 12: 0.4-0.6 s of CPU and 50 MB of heap for one page).
   */
  async list(
    db: Executor,
    teamId: string,
    query: LogListQuery,
  ): Promise<{ rows: EmailLogListRow[]; total: number }> {
    const conditions: SQL[] = [eq(emailLogs.teamId, teamId)];
    if (query.status) conditions.push(eq(emailLogs.status, query.status));
    if (query.templateId) conditions.push(eq(emailLogs.templateId, query.templateId));
    conditions.push(...createdWithin(query));
    if (query.search) {
      const pattern = containsPattern(query.search);
      conditions.push(
        or(
          ilike(emailLogs.subject, pattern),
          sql`array_to_string(${emailLogs.toAddresses}, ',') ilike ${pattern}`,
        )!,
      );
    }
    const where = and(...conditions);
    const [rows, totals] = await Promise.all([
      db
        .select(LOG_LIST_COLUMNS)
        .from(emailLogs)
        .where(where)
        .orderBy(desc(emailLogs.createdAt), desc(emailLogs.id))
        .limit(query.pageSize)
        .offset((query.page - 1) * query.pageSize),
      db.select({ total: count() }).from(emailLogs).where(where),
    ]);
    return { rows, total: totals[0]?.total ?? 0 };
  },

  /** Email counts by status for the team, optionally within [from, to] of createdAt. */
  async countByStatus(
    db: Executor,
    teamId: string,
    range: { from?: string | undefined; to?: string | undefined },
  ): Promise<Map<string, number>> {
    const conditions: SQL[] = [eq(emailLogs.teamId, teamId)];
    conditions.push(...createdWithin(range));
    const rows = await db
      .select({ status: emailLogs.status, n: count() })
      .from(emailLogs)
      .where(and(...conditions))
      .groupBy(emailLogs.status);
    return new Map(rows.map((r) => [r.status, r.n]));
  },

  /**
   * The logs of `refs` that exist in their stated team (others are left out), in no order. Read by
   * primary key only (one array parameter), the team checked on each row: with a team condition
   * in the SQL and statistics older than the team's backlog (a burst newer than autovacuum's last
   * analyze), PostgreSQL read the team's whole range of `email_logs_team_status_idx` for every
   * batch (issue #9, bench:send: ~12,000 index entries per batch of ~14).
   */
  async findLogs(db: Executor, refs: readonly { teamId: string; id: string }[]): Promise<EmailLogRow[]> {
    if (refs.length === 0) return [];
    // Prepared once per database (the send worker reads each batch's logs with it): Drizzle built
    // this select for every batch, about 2 % of the worker's CPU (session 22).
    const rows = await findLogsStatement(db).execute({ ids: distinct(refs.map((ref) => ref.id)) });
    const wanted = new Set(refs.map((ref) => `${ref.teamId}/${ref.id}`));
    return rows.filter((row) => wanted.has(`${row.teamId}/${row.id}`));
  },

  /**
   * Appends status events (history rows) in one statement, the rows travelling as one JSON
   * parameter; a row whose email is not in its stated team is left out (an event is only ever
   * written under its email's own team). Without `occurredAt` a row takes the transaction's `now()`
   * (the same instant as its log's `createdAt` when both are inserted in one transaction).
   */
  async insertEvents(db: Executor, rows: readonly NewEmailEvent[]): Promise<void> {
    if (rows.length === 0) return;
    await db.execute(eventsInsert(bound(eventValues(rows))));
  },

  /**
   * Moves each email of `rows` to its `status` in one statement, but only an email whose current
   * status is one of the row's `from` (the caller's state-machine rule, checked here against the
   * row as it is now, under its lock). Sets the status's timestamp column only if it is still
   * empty, `updatedAt` to `at`, and the optional fields given. Returns the rows that moved.
   * At most one row per email per call (UPDATE … FROM uses one source row per target).
   * `events`, when given, are appended as by {@link insertEvents} in the same statement (one round
   * trip instead of two; the batched worker records every group of outcomes this way).
   * `options.complete`, a data-modifying statement (`update … returning id`, e.g.
   * JobQueue.completionSql), runs as a CTE of the same statement; `options.onlyIf`, an SQL
   * condition, gates the history rows and the moves (give `complete` the same condition): the
   * statement then does everything or nothing, atomic even outside a transaction (issue #9: the
   * worker records a group of outcomes and completes its jobs in ONE round trip).
   */
  async applyTransitions(
    db: Executor,
    rows: readonly TransitionRow[],
    events: readonly NewEmailEvent[] = [],
    options: { complete?: SQL | undefined; onlyIf?: SQL | undefined } = {},
  ): Promise<EmailLogRow[]> {
    if (rows.length === 0 && !options.complete && !options.onlyIf) {
      await this.insertEvents(db, events);
      return [];
    }
    return transitionsUpdate(
      db,
      bound(transitionValues(rows, events)),
      events.length > 0,
      options,
    ).returning();
  },

  /**
   * {@link applyTransitions} that returns only the ids of the rows that moved (the worker's
   * one-statement recording reads nothing else: PostgreSQL sends, and the client parses, one
   * column instead of every column of every moved row), with `options.complete` and
   * `options.onlyIf` as statement parts built once: the statement is built once per shape and run
   * as a named statement, parsed and planned once per connection (NamedStatement; sessions 21-22).
   * @throws Error when `db` is a transaction (it runs on the database's pool); the database's error.
   */
  async applyTransitionsReturningIds(
    db: Executor,
    rows: readonly TransitionRow[],
    events: readonly NewEmailEvent[],
    options: { complete: StatementPart; onlyIf: StatementPart },
  ): Promise<string[]> {
    const pool = poolOf(db);
    if (!pool) throw new Error('applyTransitionsReturningIds: runs on the database, not in a transaction');
    const withEvents = events.length > 0;
    const key = `${withEvents}\0${options.complete.key}\0${options.onlyIf.key}`;
    let statement = transitionStatements.get(key);
    if (!statement) {
      const query = transitionsUpdate(db, placeholder, withEvents, {
        complete: options.complete.sql,
        onlyIf: options.onlyIf.sql,
      }).returning({ id: emailLogs.id });
      statement = new NamedStatement(query.getSQL());
      transitionStatements.set(key, statement);
    }
    const moved = await statement.run<{ id: string }>(pool, {
      ...options.onlyIf.values,
      ...options.complete.values,
      ...transitionValues(rows, events),
    });
    return moved.map((row) => row.id);
  },

  /** Whether any of the history rows `ids` exists (one index lookup per id). */
  async eventsExist(db: Executor, ids: readonly string[]): Promise<boolean> {
    if (ids.length === 0) return false;
    const [row] = await db
      .select({ id: emailEvents.id })
      .from(emailEvents)
      .where(sql`${emailEvents.id} = any(${sql.param([...ids])}::text[])`)
      .limit(1);
    return row !== undefined;
  },

  /**
   * Sets the timestamp of each late event's status on its email when the email is already past
   * that status (`rows[].past`, see email-status.ts statusesPast) and the timestamp is still empty;
   * never changes `status` (one statement; rows whose email is elsewhere are left alone).
   */
  async fillLateTimestamps(
    db: Executor,
    rows: readonly {
      id: string;
      teamId: string;
      status: EmailStatus;
      past: readonly EmailStatus[];
      at: Date;
    }[],
  ): Promise<void> {
    if (rows.length === 0) return;
    const source = rows.map((row) => ({
      id: row.id,
      team_id: row.teamId,
      status: row.status,
      past: row.past,
      at: row.at.toISOString(),
    }));
    await db
      .update(emailLogs)
      .set(STATUS_TIMESTAMP_SETS)
      .from(
        sql`jsonb_to_recordset(${JSON.stringify(source)}::jsonb) as v(id text, team_id text, status text, past text[], at timestamptz)`,
      )
      .where(
        and(
          eq(emailLogs.id, sql`v.id`),
          eq(emailLogs.teamId, sql`v.team_id`),
          sql`${emailLogs.status}::text = any(v.past)`,
        ),
      );
  },

  /**
   * Records a failed attempt that will be retried: attemptCount and errorMessage of each email that
   * is still `queued` (one statement). Not a status change, so no history row.
   */
  async recordAttempts(
    db: Executor,
    rows: readonly { id: string; teamId: string; attemptCount: number; errorMessage: string }[],
  ): Promise<void> {
    if (rows.length === 0) return;
    const source = rows.map((row) => ({
      id: row.id,
      team_id: row.teamId,
      attempt_count: row.attemptCount,
      error_message: row.errorMessage,
    }));
    await db
      .update(emailLogs)
      .set({ attemptCount: sql`v.attempt_count`, errorMessage: sql`v.error_message`, updatedAt: new Date() })
      .from(
        sql`jsonb_to_recordset(${JSON.stringify(source)}::jsonb) as v(id text, team_id text, attempt_count integer, error_message text)`,
      )
      .where(
        and(
          eq(emailLogs.id, sql`v.id`),
          eq(emailLogs.teamId, sql`v.team_id`),
          byIds(rows.map((row) => row.id)),
          eq(emailLogs.status, 'queued'),
        ),
      );
  },
};

/** A date alone (`2026-11-27`), as a range bound may be given. */
const DATE_ONLY = /^\d{4}-\d{2}-\d{2}$/;
const DAY_MS = 86_400_000;
/** The first instant after 9999-12-31 (10000-01-01T00:00Z), past the last day a bound may name. */
const END_OF_YEAR_9999_MS = 253_402_300_800_000;

/**
 * The conditions of a log range on createdAt: from `from` on, up to and including `to`; a `to`
 * given as a date alone takes in that whole day (UTC), up to the next midnight (review finding,
 * session 15: `from=D&to=D` found nothing, `to` read as 00:00 that day). `to=9999-12-31`, the
 * last day the schema allows, sets no upper bound: its next midnight is in year 10000, whose ISO
 * form (`+010000-…`) PostgreSQL cannot parse, and the request failed as unsupported data
 * (review finding, session 18).
 */
function createdWithin(range: { from?: string | undefined; to?: string | undefined }): SQL[] {
  const conditions: SQL[] = [];
  if (range.from) conditions.push(gte(emailLogs.createdAt, new Date(range.from)));
  if (range.to && DATE_ONLY.test(range.to)) {
    const end = Date.parse(range.to) + DAY_MS;
    if (end < END_OF_YEAR_9999_MS) conditions.push(lt(emailLogs.createdAt, new Date(end)));
  } else if (range.to) conditions.push(lte(emailLogs.createdAt, new Date(range.to)));
  return conditions;
}
