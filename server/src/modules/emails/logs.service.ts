import type { Executor } from '../../db/client.ts';
import { isoOrNull, type Page, page } from '../../http/envelope.ts';
import { notFound } from '../../http/errors.ts';
import { type RenderedEmail, renderTemplate } from '../rendering/index.ts';
import { getTemplateVersion, type TemplateVersionRow } from '../templates/index.ts';
import { recipientRepository } from './email-recipients.repository.ts';
import { presentRecipients, type RecipientView } from './email-recipients.ts';
import { EMAIL_STATUSES, type EmailStatus } from './email-status.ts';
import {
  type EmailEventRow,
  type EmailLogListRow,
  type EmailLogRow,
  emailRepository,
} from './emails.repository.ts';
import type { LogListQuery } from './emails.schema.ts';
import { withTeamLogRead } from './log-read-slots.ts';
import { loadSendFields } from './send-fields.ts';

/** List item (spec "Email log": list items carry …). */
export function presentLogListItem(row: EmailLogListRow) {
  return {
    id: row.id,
    templateId: row.templateId,
    templateName: row.templateName,
    toAddresses: row.toAddresses,
    subject: row.subject,
    status: row.status,
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
    spamAt: isoOrNull(row.spamAt),
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

/**
 * Who wrote a history entry, for entries whose detail does not say (`detail.source`): the accept
 * path wrote `queued` (and cancellations), the worker `sent`/`failed`, built-in tracking
 * `opened`/`clicked`, a provider the rest.
 */
function defaultSource(status: EmailStatus, detail: Record<string, unknown>): string {
  if (status === 'queued' || detail.cancelled === true) return 'api';
  if (status === 'sent' || status === 'failed') return 'worker';
  if (status === 'opened' || status === 'clicked') return 'tracking';
  return 'provider';
}

/**
 * `GET /api/logs/:id/events` (issue #11): the email's full history, oldest first, as
 * `[{status, at, source, detail}]`: every event ever recorded, including the ones that did not move
 * the status (a late `delivered`, a soft bounce). `source` is `detail.source` when the writer set
 * one (provider events: `provider:<adapter type>`), else {@link defaultSource}.
 * @throws NOT_FOUND when the email is not the team's.
 */
export async function getEmailHistory(db: Executor, teamId: string, id: string) {
  await getLog(db, teamId, id);
  const events = await emailRepository.events(db, teamId, id);
  return events.map((event) => {
    const detail = event.detail as Record<string, unknown>;
    return {
      status: event.status,
      at: event.occurredAt.toISOString(),
      source: typeof detail.source === 'string' ? detail.source : defaultSource(event.status, detail),
      detail,
    };
  });
}

/**
 * The full log with its history, its issue #10 send fields (cc, bcc, replyTo, headers, tags,
 * metadata, attachment names and sizes, scheduledAt) and its `recipients` (issue #11, as
 * {@link getLogRecipients}). @throws NOT_FOUND.
 */
export async function getLogWithEvents(db: Executor, teamId: string, id: string) {
  const row = await getLog(db, teamId, id);
  const [events, fields, recipientRows] = await Promise.all([
    emailRepository.events(db, teamId, id),
    loadSendFields(db, teamId, id),
    recipientRepository.rowsOf(db, teamId, [id]),
  ]);
  const { subjectTemplate: _subject, adapterId: _adapter, ...view } = fields;
  return {
    ...presentLog(row, events),
    ...view,
    recipients: presentRecipients(row, fields.cc, fields.bcc, recipientRows),
  };
}

/**
 * `GET /api/logs/:id/recipients` (issue #11 "Outcomes per recipient"): every recipient of the
 * team's email `id` — `to`, then `cc`, then `bcc`, each address once — as `{address, kind, status,
 * bounceType, diagnostic, sentAt, deliveredAt, openedAt, clickedAt, bouncedAt, failedAt, spamAt,
 * deferredAt}` (timestamps ISO 8601 or null); what the model is: emails/email-recipients.ts.
 * @throws NOT_FOUND when the email is not the team's.
 */
export async function getLogRecipients(db: Executor, teamId: string, id: string): Promise<RecipientView[]> {
  const row = await getLog(db, teamId, id);
  const [copies, rows] = await Promise.all([
    recipientRepository.copiesOf(db, teamId, [id]),
    recipientRepository.rowsOf(db, teamId, [id]),
  ]);
  const copy = copies.get(id);
  return presentRecipients(row, copy?.cc ?? [], copy?.bcc ?? [], rows);
}

/**
 * Paginated logs, newest first, filtered as the spec's `GET /api/logs` query says; at most
 * LOG_READS_PER_TEAM of a team's log reads run at once (log-read-slots.ts).
 * @throws RATE_LIMITED (429) when too many of the team's log reads wait.
 */
export async function listLogs(
  db: Executor,
  teamId: string,
  query: LogListQuery,
): Promise<Page<ReturnType<typeof presentLogListItem>>> {
  const { rows, total } = await withTeamLogRead(teamId, () => emailRepository.list(db, teamId, query));
  return page(rows.map(presentLogListItem), total, query.page, query.pageSize);
}

/** `GET /api/v1/:id/status` data: {id, status, sentAt, hasPdfAttachment}. @throws NOT_FOUND. */
export async function getEmailStatus(db: Executor, teamId: string, id: string) {
  const row = await getLog(db, teamId, id);
  return {
    id: row.id,
    status: row.status,
    sentAt: isoOrNull(row.sentAt),
    hasPdfAttachment: row.hasPdfAttachment,
  };
}

/**
 * Renders a logged email from what its log recorded: the immutable template version
 * (`templateVersionId`) with the stored `variables`, through the same compiled-template cache
 * key as the send. The send job delivers exactly this, so the result equals what was sent
 * (issue #4: "a log can always be re-rendered exactly"), also after the template was edited,
 * restored or deleted. Returns {subject, html, text}.
 * @throws NOT_FOUND when the version is gone; INVALID_TEMPLATE if it no longer renders.
 */
export async function renderLoggedEmail(
  db: Executor,
  log: Pick<EmailLogRow, 'teamId' | 'templateVersionId' | 'variables'>,
): Promise<RenderedEmail> {
  const version = await getTemplateVersion(db, log.teamId, log.templateVersionId);
  return renderLoggedEmailWith(version, log);
}

/**
 * {@link renderLoggedEmail} with the log's template version already loaded (the worker loads a
 * whole batch's versions at once): the one render both the send and the re-render go through.
 * @throws INVALID_TEMPLATE if the version no longer renders.
 */
export function renderLoggedEmailWith(
  version: Pick<TemplateVersionRow, 'id' | 'subject' | 'designJson'>,
  log: Pick<EmailLogRow, 'variables'>,
): Promise<RenderedEmail> {
  return renderTemplate(
    { subject: version.subject, designJson: version.designJson, cacheKey: version.id },
    log.variables as Record<string, unknown>,
  );
}

/**
 * `GET /api/logs/:id/rendered` data: {subject, html, text} of the team's email `id`: HTML and
 * text re-rendered by {@link renderLoggedEmail}, the subject as logged. @throws NOT_FOUND.
 */
export async function rerenderLog(db: Executor, teamId: string, id: string): Promise<RenderedEmail> {
  const log = await getLog(db, teamId, id);
  // The subject as sent: the template's, or the send's `subject` override (issue #10), rendered
  // once at accept and kept on the log.
  return { ...(await renderLoggedEmail(db, log)), subject: log.subject };
}

/**
 * `GET /api/logs/stats` data (spec "Email logs"): total and one count per status, over emails
 * created within [from, to] when given. `sent` counts emails sent but not yet delivered (or further).
 */
export async function getLogStats(
  db: Executor,
  teamId: string,
  range: { from?: string | undefined; to?: string | undefined },
): Promise<{ total: number } & Record<EmailStatus, number>> {
  const counts = await withTeamLogRead(teamId, () => emailRepository.countByStatus(db, teamId, range));
  const byStatus = Object.fromEntries(
    EMAIL_STATUSES.map((status) => [status, counts.get(status) ?? 0]),
  ) as Record<EmailStatus, number>;
  const total = Object.values(byStatus).reduce((sum, n) => sum + n, 0);
  return { total, ...byStatus };
}
