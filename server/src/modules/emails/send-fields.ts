import { and, asc, eq, inArray, sql } from 'drizzle-orm';
import { z } from 'zod';
import type { Executor } from '../../db/client.ts';
import { emailAttachments, emailSendOptions } from '../../db/schema/index.ts';
import { AppError, notFound } from '../../http/errors.ts';
import { newId } from '../../ids.ts';
import type { EmailTags, OutgoingAttachment, OutgoingEmail } from '../../providers/types.ts';
import { asList, type SendFieldsInput } from './send-fields.schema.ts';

/**
 * The send fields of issue #10 beyond template, `to`, `from` and variables: how they are stored at
 * accept (`email_send_options`, `email_attachments`), what the worker adds to the outgoing message,
 * and what the log shows (their request schema: send-fields.schema.ts). Kept apart from the accept
 * and delivery code so those stay small.
 */

/** What an accepted send stores besides its log (absent for a send without any issue #10 field). */
export interface SendFieldRows {
  emailId: string;
  options: typeof emailSendOptions.$inferInsert | undefined;
  attachments: (typeof emailAttachments.$inferInsert)[];
  /**
   * Copy the attachments of email `emailId` of team `teamId` (a resend, always of the sending
   * team's own email), in the same transaction: `count` of them, as many as the resend read.
   */
  copyAttachmentsOf: { teamId: string; emailId: string; count: number } | undefined;
}

/** What the worker adds to the message, carried in the `email.send` job (no extra query). */
export interface OutgoingFields {
  cc?: string[] | undefined;
  bcc?: string[] | undefined;
  replyTo?: string[] | undefined;
  headers?: Record<string, string> | undefined;
  tags?: EmailTags | undefined;
  /** Attachments are stored with the email and loaded by the worker. */
  attachments?: boolean | undefined;
  /** The send's tracking override (issue #11; absent: the template version's setting). */
  trackOpens?: boolean | undefined;
  trackClicks?: boolean | undefined;
}

/**
 * The rows and job fields for the issue #10 fields of one accepted send. `subjectTemplate` is the
 * raw override (kept so a resend renders it again); `adapterId` the adapter the caller named.
 * Returns `rows: undefined` and `fields: undefined` when the send uses none of them.
 */
export function sendFieldRows(
  ids: { emailId: string; teamId: string },
  input: SendFieldsInput,
  extra: {
    copyAttachmentsOf?: string | undefined;
    attachmentCount?: number;
    /** PDFs rendered at accept (issue #12, send-pdfs.ts), stored after the request's attachments. */
    pdfs?: readonly { filename: string; content: Buffer }[];
  } = {},
): { rows: SendFieldRows | undefined; fields: OutgoingFields | undefined; scheduledAt: Date | undefined } {
  const cc = asList(input.cc);
  const bcc = asList(input.bcc);
  const replyTo = asList(input.replyTo);
  const files = input.attachments ?? [];
  const pdfs = extra.pdfs ?? [];
  const scheduledAt = input.scheduledAt ? new Date(input.scheduledAt) : undefined;
  const hasOptions =
    cc.length + bcc.length + replyTo.length > 0 ||
    Object.keys(input.headers ?? {}).length > 0 ||
    Object.keys(input.tags ?? {}).length > 0 ||
    Object.keys(input.metadata ?? {}).length > 0 ||
    input.subject !== undefined ||
    input.adapterId !== undefined ||
    input.trackOpens !== undefined ||
    input.trackClicks !== undefined ||
    scheduledAt !== undefined;
  const copyCount = extra.attachmentCount ?? 0;
  const copied = extra.copyAttachmentsOf !== undefined && copyCount > 0;
  if (!hasOptions && files.length === 0 && pdfs.length === 0 && !copied) {
    return { rows: undefined, fields: undefined, scheduledAt: undefined };
  }
  const rows: SendFieldRows = {
    emailId: ids.emailId,
    options: hasOptions
      ? {
          emailId: ids.emailId,
          teamId: ids.teamId,
          cc,
          bcc,
          replyTo,
          headers: input.headers ?? {},
          tags: input.tags ?? {},
          metadata: input.metadata ?? {},
          subjectTemplate: input.subject ?? null,
          scheduledAt: scheduledAt ?? null,
          adapterId: input.adapterId ?? null,
          trackOpens: input.trackOpens ?? null,
          trackClicks: input.trackClicks ?? null,
        }
      : undefined,
    attachments: files.map((file, position) => {
      const content = Buffer.from(file.content, 'base64');
      return {
        id: newId('attachment'),
        teamId: ids.teamId,
        emailId: ids.emailId,
        position,
        filename: file.filename,
        contentType: file.contentType ?? 'application/octet-stream',
        size: content.length,
        content,
      };
    }),
    copyAttachmentsOf:
      copied && extra.copyAttachmentsOf
        ? { teamId: ids.teamId, emailId: extra.copyAttachmentsOf, count: copyCount }
        : undefined,
  };
  for (const [index, pdf] of pdfs.entries()) {
    rows.attachments.push({
      id: newId('attachment'),
      teamId: ids.teamId,
      emailId: ids.emailId,
      position: files.length + index,
      filename: pdf.filename,
      contentType: 'application/pdf',
      size: pdf.content.length,
      content: pdf.content,
    });
  }
  const fields: OutgoingFields = {
    ...(cc.length ? { cc } : {}),
    ...(bcc.length ? { bcc } : {}),
    ...(replyTo.length ? { replyTo } : {}),
    ...(input.headers && Object.keys(input.headers).length ? { headers: input.headers } : {}),
    ...(input.tags && Object.keys(input.tags).length ? { tags: input.tags } : {}),
    ...(files.length > 0 || pdfs.length > 0 || copied ? { attachments: true } : {}),
    ...(input.trackOpens !== undefined ? { trackOpens: input.trackOpens } : {}),
    ...(input.trackClicks !== undefined ? { trackClicks: input.trackClicks } : {}),
  };
  return { rows, fields, scheduledAt };
}

/**
 * Writes the {@link SendFieldRows} of a batch of accepted sends inside `tx` (after their logs):
 * one insert for the options, one for new attachments, one copy per resent email's attachments.
 * A copy reads only attachments of its own team (`copyAttachmentsOf.teamId`, the sending team).
 * @throws NOT_FOUND ('Email', what the resend of a missing email answers) when a copy finds fewer
 *   attachments than the resend read (another team's email has none to give): the original was
 *   deleted meanwhile (LOG_RETENTION_DAYS), and the resend would have been sent without them
 *   (review finding diff19 2). The accept batcher
 *   then fails that send alone (db/group-commit.ts), with nothing of it written.
 */
export async function writeSendFields(
  tx: Executor,
  all: readonly (SendFieldRows | undefined)[],
): Promise<void> {
  const rows = all.filter((row): row is SendFieldRows => row !== undefined);
  if (rows.length === 0) return;
  const options = rows.flatMap((row) => (row.options ? [row.options] : []));
  if (options.length > 0) await tx.insert(emailSendOptions).values(options);
  const files = rows.flatMap((row) => row.attachments);
  if (files.length > 0) await tx.insert(emailAttachments).values(files);
  for (const row of rows) {
    const copy = row.copyAttachmentsOf;
    if (!copy) continue;
    const target = row.emailId;
    // Only the sending team's own attachments, and stored as its own: every query names its team
    // (review finding, session 22: this copy read the source email's attachments by id alone).
    const result = await tx.execute(sql`
      insert into ${emailAttachments} (id, team_id, email_id, position, filename, content_type, size, content)
      select 'att_' || replace(gen_random_uuid()::text, '-', ''), ${copy.teamId}, ${target}, position, filename,
        content_type, size, content
      from ${emailAttachments} where team_id = ${copy.teamId} and email_id = ${copy.emailId}`);
    if (((result as { rowCount?: number | null }).rowCount ?? 0) < copy.count) throw notFound('Email');
  }
}

/** The attachments of email `emailId` (team-scoped), in the order they were sent. */
export async function loadAttachments(
  db: Executor,
  teamId: string,
  emailId: string,
): Promise<OutgoingAttachment[]> {
  const rows = await db
    .select({
      filename: emailAttachments.filename,
      contentType: emailAttachments.contentType,
      content: emailAttachments.content,
    })
    .from(emailAttachments)
    .where(and(eq(emailAttachments.teamId, teamId), eq(emailAttachments.emailId, emailId)))
    .orderBy(asc(emailAttachments.position));
  return rows;
}

/** What `GET /api/logs/:id` shows of the issue #10 fields. */
export interface SendFieldsView {
  cc: string[];
  bcc: string[];
  replyTo: string[];
  headers: Record<string, string>;
  tags: EmailTags;
  metadata: Record<string, string>;
  attachments: { filename: string; contentType: string; size: number }[];
  scheduledAt: string | null;
}

/** zod schema of {@link SendFieldsView} (the log view's extension). */
export const sendFieldsViewShape = {
  cc: z.array(z.string()),
  bcc: z.array(z.string()),
  replyTo: z.array(z.string()),
  headers: z.record(z.string(), z.string()),
  tags: z.union([z.array(z.string()), z.record(z.string(), z.string())]),
  metadata: z.record(z.string(), z.string()),
  attachments: z.array(z.object({ filename: z.string(), contentType: z.string(), size: z.number() })),
  scheduledAt: z.string().nullable(),
};

/** The stored options of email `emailId` and its attachment names and sizes (two queries). */
export async function loadSendFields(
  db: Executor,
  teamId: string,
  emailId: string,
): Promise<
  SendFieldsView & {
    subjectTemplate: string | null;
    adapterId: string | null;
    trackOpens: boolean | null;
    trackClicks: boolean | null;
  }
> {
  const [[options], files] = await Promise.all([
    db
      .select()
      .from(emailSendOptions)
      .where(and(eq(emailSendOptions.teamId, teamId), eq(emailSendOptions.emailId, emailId))),
    db
      .select({
        filename: emailAttachments.filename,
        contentType: emailAttachments.contentType,
        size: emailAttachments.size,
      })
      .from(emailAttachments)
      .where(and(eq(emailAttachments.teamId, teamId), inArray(emailAttachments.emailId, [emailId])))
      .orderBy(asc(emailAttachments.position)),
  ]);
  return {
    cc: options?.cc ?? [],
    bcc: options?.bcc ?? [],
    replyTo: options?.replyTo ?? [],
    headers: (options?.headers ?? {}) as Record<string, string>,
    tags: (options?.tags ?? {}) as EmailTags,
    metadata: (options?.metadata ?? {}) as Record<string, string>,
    attachments: files,
    scheduledAt: options?.scheduledAt?.toISOString() ?? null,
    subjectTemplate: options?.subjectTemplate ?? null,
    adapterId: options?.adapterId ?? null,
    trackOpens: options?.trackOpens ?? null,
    trackClicks: options?.trackClicks ?? null,
  };
}

/** @throws VALIDATION_ERROR (400) naming `adapterId` when it is not one of the team's active adapters. */
export function unknownAdapterError(adapterId: string, why: 'not found' | 'disabled'): AppError {
  return new AppError(
    'VALIDATION_ERROR',
    `Adapter "${adapterId}" ${why === 'not found' ? 'not found' : 'is disabled'}`,
    {
      reason: why === 'not found' ? 'UNKNOWN_ADAPTER' : 'ADAPTER_DISABLED',
      issues: [
        {
          path: 'body.adapterId',
          message: why === 'not found' ? "must be one of the team's adapters" : 'adapter is disabled',
        },
      ],
    },
  );
}

/**
 * What the worker adds to an email's outgoing message (issue #10): cc, bcc, replyTo, headers and
 * tags from the job, and the stored attachments (one query, only when the job says there are some).
 * The recipients were checked against the team's suppression list when the batch was loaded
 * (send-batch.ts).
 */
export async function outgoingFieldsFor(
  db: Executor,
  log: { id: string; teamId: string },
  fields: OutgoingFields | undefined,
): Promise<{ message: Partial<OutgoingEmail> }> {
  if (!fields) return { message: {} };
  // The tracking override is applied to the HTML by the worker (modules/tracking), not a message field.
  const { attachments, trackOpens: _opens, trackClicks: _clicks, ...rest } = fields;
  const message: Partial<OutgoingEmail> = Object.fromEntries(
    Object.entries(rest).filter(([, value]) => value !== undefined),
  );
  if (attachments) message.attachments = await loadAttachments(db, log.teamId, log.id);
  return { message };
}
