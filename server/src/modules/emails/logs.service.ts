import type { Executor } from '../../db/client.ts';
import { isoOrNull, type Page, page } from '../../http/envelope.ts';
import { notFound } from '../../http/errors.ts';
import type { EmailStatus } from './email-status.ts';
import { type EmailEventRow, type EmailLogRow, emailRepository } from './emails.repository.ts';
import type { LogListQuery } from './emails.schema.ts';

/** List item (spec "Email log": list items carry …). */
export function presentLogListItem(row: EmailLogRow) {
  return {
    id: row.id,
    templateId: row.templateId,
    templateName: row.templateName,
    toAddresses: row.toAddresses,
    subject: row.subject,
    status: row.status as EmailStatus,
    createdAt: row.createdAt.toISOString(),
    sentAt: isoOrNull(row.sentAt),
  };
}

/** Full log (spec "Email log") plus the other status timestamps and the status history. */
export function presentLog(row: EmailLogRow, events: EmailEventRow[]) {
  return {
    ...presentLogListItem(row),
    teamId: row.teamId,
    templateVersionId: row.templateVersionId,
    adapterId: row.adapterId,
    apiKeyId: row.apiKeyId,
    fromAddress: row.fromAddress,
    variables: row.variables as Record<string, unknown>,
    providerMessageId: row.providerMessageId,
    errorMessage: row.errorMessage,
    hasPdfAttachment: row.hasPdfAttachment,
    jobId: row.jobId,
    attemptCount: row.attemptCount,
    deliveredAt: isoOrNull(row.deliveredAt),
    openedAt: isoOrNull(row.openedAt),
    clickedAt: isoOrNull(row.clickedAt),
    bouncedAt: isoOrNull(row.bouncedAt),
    failedAt: isoOrNull(row.failedAt),
    updatedAt: row.updatedAt.toISOString(),
    events: events.map((e) => ({
      status: e.status,
      occurredAt: e.occurredAt.toISOString(),
      detail: e.detail as Record<string, unknown>,
    })),
  };
}

/** @throws NOT_FOUND when the email is not the team's. */
export async function getLog(db: Executor, teamId: string, id: string): Promise<EmailLogRow> {
  const row = await emailRepository.findLog(db, teamId, id);
  if (!row) throw notFound('Email');
  return row;
}

/** The full log with its history. @throws NOT_FOUND. */
export async function getLogWithEvents(db: Executor, teamId: string, id: string) {
  const row = await getLog(db, teamId, id);
  return presentLog(row, await emailRepository.events(db, teamId, id));
}

/** Paginated logs, newest first, filtered as the spec's `GET /api/logs` query says. */
export async function listLogs(
  db: Executor,
  teamId: string,
  query: LogListQuery,
): Promise<Page<ReturnType<typeof presentLogListItem>>> {
  const { rows, total } = await emailRepository.list(db, teamId, query);
  return page(rows.map(presentLogListItem), total, query.page, query.pageSize);
}

/** `GET /api/v1/:id/status` data: {id, status, sentAt, hasPdfAttachment}. @throws NOT_FOUND. */
export async function getEmailStatus(db: Executor, teamId: string, id: string) {
  const row = await getLog(db, teamId, id);
  return {
    id: row.id,
    status: row.status as EmailStatus,
    sentAt: isoOrNull(row.sentAt),
    hasPdfAttachment: row.hasPdfAttachment,
  };
}
