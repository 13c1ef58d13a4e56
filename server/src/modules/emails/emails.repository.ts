import { and, asc, count, desc, eq, gte, ilike, lte, or, type SQL, sql } from 'drizzle-orm';
import type { Executor } from '../../db/client.ts';
import { containsPattern } from '../../db/like-pattern.ts';
import { emailEvents, emailLogs } from '../../db/schema/index.ts';
import { newId } from '../../ids.ts';
import { canTransition, type EmailStatus, STATUS_TIMESTAMP } from './email-status.ts';
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
>;

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
      })),
    );
    await db.execute(sql`
      insert into email_logs (id, team_id, template_id, template_name, template_version_id, adapter_id,
        api_key_id, to_addresses, from_address, subject, variables, status, job_id)
      select id, team_id, template_id, template_name, template_version_id, adapter_id,
        api_key_id, to_addresses, from_address, subject, variables, status, job_id
      from jsonb_to_recordset(${json}::jsonb) as x(id text, team_id text, template_id text,
        template_name text, template_version_id text, adapter_id text, api_key_id text,
        to_addresses text[], from_address text, subject text, variables jsonb, status text, job_id text)`);
  },

  /**
   * Inserts status events with ONE statement (rows as one JSON parameter, as {@link insertLogs});
   * each gets a new id, `detail` defaults to {} and `occurredAt` to the transaction's `now()` (the
   * same instant as its log's `createdAt` when both are inserted in one transaction).
   */
  async insertEvents(
    db: Executor,
    rows: { teamId: string; emailId: string; status: EmailStatus; detail?: Record<string, unknown> }[],
  ): Promise<void> {
    if (rows.length === 0) return;
    const json = JSON.stringify(
      rows.map((r) => ({
        id: newId('emailEvent'),
        team_id: r.teamId,
        email_id: r.emailId,
        status: r.status,
        detail: r.detail ?? {},
      })),
    );
    await db.execute(sql`
      insert into email_events (id, team_id, email_id, status, detail)
      select id, team_id, email_id, status, detail
      from jsonb_to_recordset(${json}::jsonb) as x(id text, team_id text, email_id text, status text, detail jsonb)`);
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

  async list(
    db: Executor,
    teamId: string,
    query: LogListQuery,
  ): Promise<{ rows: EmailLogRow[]; total: number }> {
    const conditions: SQL[] = [eq(emailLogs.teamId, teamId)];
    if (query.status) conditions.push(eq(emailLogs.status, query.status));
    if (query.templateId) conditions.push(eq(emailLogs.templateId, query.templateId));
    if (query.from) conditions.push(gte(emailLogs.createdAt, new Date(query.from)));
    if (query.to) conditions.push(lte(emailLogs.createdAt, new Date(query.to)));
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
        .select()
        .from(emailLogs)
        .where(where)
        .orderBy(desc(emailLogs.createdAt), desc(emailLogs.id))
        .limit(query.pageSize)
        .offset((query.page - 1) * query.pageSize),
      db.select({ total: count() }).from(emailLogs).where(where),
    ]);
    return { rows, total: totals[0]?.total ?? 0 };
  },

  /**
   * Records `status` for an email: always appends to its history; moves `status` and sets the
   * status's timestamp only when the state machine allows it. Returns the updated row, or
   * undefined when the status did not move (a late or repeated event).
   */
  async recordStatus(
    db: Executor,
    log: Pick<EmailLogRow, 'id' | 'teamId' | 'status'>,
    status: EmailStatus,
    changes: Partial<Pick<EmailLogRow, 'providerMessageId' | 'errorMessage' | 'attemptCount'>> = {},
    detail: Record<string, unknown> = {},
    at: Date = new Date(),
  ): Promise<EmailLogRow | undefined> {
    await emailRepository.insertEvent(db, {
      teamId: log.teamId,
      emailId: log.id,
      status,
      detail,
      occurredAt: at,
    });
    if (!canTransition(log.status as EmailStatus, status)) return undefined;
    const [row] = await db
      .update(emailLogs)
      .set({ ...changes, status, [STATUS_TIMESTAMP[status]]: at, updatedAt: at })
      .where(and(eq(emailLogs.id, log.id), eq(emailLogs.status, log.status)))
      .returning();
    return row;
  },

  /** Email counts by status for the team, optionally within [from, to] of createdAt. */
  async countByStatus(
    db: Executor,
    teamId: string,
    range: { from?: string | undefined; to?: string | undefined },
  ): Promise<Map<string, number>> {
    const conditions: SQL[] = [eq(emailLogs.teamId, teamId)];
    if (range.from) conditions.push(gte(emailLogs.createdAt, new Date(range.from)));
    if (range.to) conditions.push(lte(emailLogs.createdAt, new Date(range.to)));
    const rows = await db
      .select({ status: emailLogs.status, n: count() })
      .from(emailLogs)
      .where(and(...conditions))
      .groupBy(emailLogs.status);
    return new Map(rows.map((r) => [r.status, r.n]));
  },

  async recordAttempt(
    db: Executor,
    id: string,
    attemptCount: number,
    errorMessage: string | null,
  ): Promise<void> {
    await db
      .update(emailLogs)
      .set({ attemptCount, errorMessage, updatedAt: new Date() })
      .where(eq(emailLogs.id, id));
  },
};
