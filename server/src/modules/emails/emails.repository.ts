import { and, asc, count, desc, eq, gte, ilike, lte, or, type SQL, sql } from 'drizzle-orm';
import type { Executor } from '../../db/client.ts';
import { containsPattern } from '../../db/like-pattern.ts';
import { emailEvents, emailLogs } from '../../db/schema/index.ts';
import { newId } from '../../ids.ts';
import { canTransition, type EmailStatus, STATUS_TIMESTAMP } from './email-status.ts';
import type { LogListQuery } from './emails.schema.ts';

export type EmailLogRow = typeof emailLogs.$inferSelect;
export type EmailEventRow = typeof emailEvents.$inferSelect;

/** SQL for email logs and their status history; every query is scoped by team. */
export const emailRepository = {
  async insertLog(db: Executor, row: typeof emailLogs.$inferInsert): Promise<EmailLogRow> {
    const [created] = await db.insert(emailLogs).values(row).returning();
    return created!;
  },

  /**
   * Inserts email logs with ONE multi-row statement (the group-commit accept path). Columns left
   * out take their defaults, so `createdAt` is the transaction's `now()` for every row.
   */
  async insertLogs(db: Executor, rows: (typeof emailLogs.$inferInsert)[]): Promise<void> {
    if (rows.length > 0) await db.insert(emailLogs).values(rows);
  },

  /**
   * Inserts status events with ONE multi-row statement; each gets a new id, `detail` defaults to
   * {} and `occurredAt` to the transaction's `now()` (the same instant as its log's `createdAt`
   * when both are inserted in one transaction).
   */
  async insertEvents(
    db: Executor,
    rows: { teamId: string; emailId: string; status: EmailStatus; detail?: Record<string, unknown> }[],
  ): Promise<void> {
    if (rows.length === 0) return;
    await db.insert(emailEvents).values(rows.map((row) => ({ id: newId('emailEvent'), detail: {}, ...row })));
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
