import type { Database } from '../../db/client.ts';
import { isForeignKeyViolation } from '../../db/errors.ts';
import { AppError } from '../../http/errors.ts';
import { newId, newJobId } from '../../ids.ts';
import { estimatedMessageBytes, maxMessageBytesOf } from '../../providers/index.ts';
import { providerTagIssues } from '../../providers/provider-tags.ts';
import {
  type AdapterRow,
  type AdapterSendCache,
  cachedSendingAdapter,
  findAdapters,
} from '../adapters/index.ts';
import type { PdfRenderer } from '../pdf/index.ts';
import { renderSubjectLine, renderTemplateHtml } from '../rendering/index.ts';
import { cachedTemplateForSend, type TemplateSendCache } from '../templates/index.ts';
import type { AcceptBatcher, AcceptedEmailRows } from './accept-batcher.ts';
import type { SendInput } from './emails.schema.ts';
import { sendFieldRows, unknownAdapterError } from './send-fields.ts';
import { type PdfByteBudget, renderSendPdfs, sendWantsPdfs } from './send-pdfs.ts';

/** What `POST /api/v1/send` answers (spec: data = {id, jobId, status: "queued"}). */
export interface AcceptedSend {
  id: string;
  jobId: string;
  status: 'queued';
}

/**
 * What {@link acceptSend} uses, all from the context (server/src/context.ts): the database, the
 * process's accept batcher over it and the send caches (never module state, issue #9).
 */
export interface AcceptSendDeps {
  db: Database;
  acceptBatcher: AcceptBatcher;
  caches: { templatesForSend: TemplateSendCache; adaptersForSend: AdapterSendCache };
  /** The PDF renderer (issue #12), undefined when none is configured. */
  pdf: PdfRenderer | undefined;
}

/** The foreign key that refuses a log of a template deleted before the send committed. */
const LOG_TEMPLATE_FK = 'email_logs_template_id_templates_id_fk';

/**
 * Accepts a send (ARCHITECTURE.md "The send path" 1-2; issue #9): resolves the template (id or
 * slug) and the team's sending adapter (both cached briefly, see cachedTemplateForSend and
 * cachedSendingAdapter), checks PDF preconditions, renders subject and HTML to fail fast (outside
 * any transaction), then hands the email log, its first status event and the `email.send` job to
 * the accept batcher, which commits them together, in one transaction shared with concurrent
 * sends: an accepted email always has a log and a job, and one that cannot be written fails alone.
 * What the worker reuses (issue #9 "decide deliberately"; README "Performance"): the compiled
 * template of the immutable version (a per-process cache, React's render made once per version),
 * not this render. The job carries no HTML: the worker renders HTML and text part again from the
 * log's version and variables, which costs less than writing the HTML into the job row and reading
 * it back; the subject it sends is the log's (which holds the rendered override). This render
 * refuses, before anything is written, a template that does not render with these variables, and
 * gives the log its subject.
 * Issue #10 fields (send-fields.ts): the `subject` override is rendered with the variables; the
 * named `adapterId` replaces the team's default; cc, bcc, replyTo, headers, tags, metadata and
 * attachments are written with the log in the same transaction (and cc … tags travel in the job);
 * `scheduledAt` becomes the job's start time. Split into {@link prepareSend} and the write.
 * `caller.apiKeyId` is null for sends from the dashboard (resend); `origin.resendOf` is kept in the
 * first status event, `origin.copyAttachmentsOf` copies that email's stored attachments.
 * @throws INVALID_TEMPLATE (400) unknown/inactive/deleted template or a render error (also of the
 *   subject override);
 *   VALIDATION_ERROR (400) with details.reason NO_ACTIVE_ADAPTER, NO_SENDER, UNKNOWN_ADAPTER or
 *   ADAPTER_DISABLED;
 *   PDF_NOT_CONFIGURED (500) when a PDF is requested (spec case rule 6: no renderer is configured);
 *   PDF_GENERATION_FAILED (500) or INVALID_TEMPLATE (400) for a PDF that cannot be rendered
 *   (send-pdfs.ts renderSendPdfs: PDFs are rendered here, at accept, and stored as attachments);
 *   a database data exception for values PostgreSQL cannot store (mapped to 400 INVALID_INPUT).
 */
export async function acceptSend(
  deps: AcceptSendDeps,
  caller: { teamId: string; apiKeyId: string | null },
  input: SendInput,
  origin: SendOrigin = {},
  beforeWrite?: () => Promise<void>,
): Promise<AcceptedSend> {
  const prepared = await prepareSend(deps, caller, input, origin);
  // Runs once the send is known to be acceptable (a resend's per-team budget: a refused one costs none).
  await beforeWrite?.();
  try {
    await deps.acceptBatcher.submit(prepared.rows);
  } catch (error) {
    throw templateGoneError(deps, error, caller.teamId, input.templateId);
  }
  return prepared.accepted;
}

/** Where a send comes from besides the request: a resend names the original (and its attachments). */
export interface SendOrigin {
  resendOf?: string;
  /** Copy the stored attachments of this email (resend), `attachmentCount` of them. */
  copyAttachmentsOf?: string;
  attachmentCount?: number;
  /**
   * Whether the copied attachments hold PDFs (the original's hasPdfAttachment): a resend carries the
   * original's PDFs and renders none, not even its template's generatePdf one (issue #12).
   */
  hasPdfAttachment?: boolean;
}

/**
 * Refuses, at accept, tags the email's provider would refuse at delivery (review findings: session
 * 13, `tags: {campaign: "spring sale"}` was accepted, then the email ended `failed` at Amazon SES;
 * session 16, Postmark's Metadata limits and SendGrid's custom_args size). See providerTagIssues.
 * @throws VALIDATION_ERROR (400, details.reason TAGS_REFUSED_BY_PROVIDER, an issue per tag at
 *   `body.tags.<name>`, or at `body.tags` for the tags as a whole) when the adapter's provider would
 *   refuse them: Amazon SES and Resend (ASCII letters, digits, `_` and `-`, at most 256 characters),
 *   Postmark (at most 10, names ≤ 20 and values ≤ 80 characters, no names equal but for case),
 *   SendGrid (at most 10,000 bytes as JSON).
 */
function refuseTagsTheProviderRefuses(adapterType: string, tags: SendInput['tags']): void {
  const issues = providerTagIssues(adapterType, tags);
  if (issues.length === 0) return;
  throw new AppError('VALIDATION_ERROR', "This adapter's provider would refuse these tags", {
    reason: 'TAGS_REFUSED_BY_PROVIDER',
    issues: issues.map(({ name, message }) => ({
      path: name === undefined ? 'body.tags' : `body.tags.${name}`,
      message,
    })),
  });
}

/**
 * Refuses an email larger than its adapter's provider takes (ProviderDefinition.maxMessageBytes,
 * counted as the APIs count it: estimatedMessageBytes), which it would refuse at delivery (review
 * finding, session 16: Postmark's 10 MB counts base64, so 7.5 MB of attachments, well within the
 * send API's bounds, failed there). A resend's copied attachments were checked when first sent.
 * @throws FILE_TOO_LARGE (400, details `{reason: 'EMAIL_TOO_LARGE_FOR_PROVIDER', adapterType,
 *   maxBytes, estimatedBytes}`).
 */
function refuseTooLargeForProvider(adapterType: string, attachmentBytes: number, html: string): void {
  const maxBytes = maxMessageBytesOf(adapterType);
  if (maxBytes === undefined || attachmentBytes === 0) return;
  const estimatedBytes = estimatedMessageBytes(attachmentBytes, html);
  if (estimatedBytes <= maxBytes) return;
  throw new AppError(
    'FILE_TOO_LARGE',
    `The email would be about ${estimatedBytes} bytes as this adapter's provider counts it (attachments base64-encoded); it takes at most ${maxBytes}`,
    { reason: 'EMAIL_TOO_LARGE_FOR_PROVIDER', adapterType, maxBytes, estimatedBytes },
  );
}

/** The longest rendered subject accepted, in characters (RFC 5322 §2.1.1's line limit; the `subject` override's bound). */
export const MAX_RENDERED_SUBJECT_CHARACTERS = 998;

/**
 * Refuses a rendered subject longer than {@link MAX_RENDERED_SUBJECT_CHARACTERS}: variables could
 * make one of any length (review finding, session 16: 5,003 characters were accepted, stored on the
 * log and sent to Postmark, which refuses subjects over 2,000).
 * @throws VALIDATION_ERROR (400, details.reason SUBJECT_TOO_LONG, an issue at `body.subject` for the
 *   override, else at `body.variables`).
 */
function refuseLongSubject(subject: string, overridden: boolean): void {
  let characters = 0;
  for (const _ of subject) characters += 1;
  if (characters <= MAX_RENDERED_SUBJECT_CHARACTERS) return;
  throw new AppError(
    'VALIDATION_ERROR',
    `The rendered subject is ${characters} characters long; at most ${MAX_RENDERED_SUBJECT_CHARACTERS} are sent`,
    {
      reason: 'SUBJECT_TOO_LONG',
      issues: [
        {
          path: overridden ? 'body.subject' : 'body.variables',
          message: `the subject renders to ${characters} characters (at most ${MAX_RENDERED_SUBJECT_CHARACTERS})`,
        },
      ],
    },
  );
}

/**
 * The error to answer for a send whose rows failed to commit: a foreign-key violation on the log's
 * template means the template was deleted after it was resolved (a concurrent delete, or through
 * another process while it was cached): nothing was written, INVALID_TEMPLATE. Anything else as is
 * (a deleted team's is the error handler's 401, http/error-handler.ts).
 */
export function templateGoneError(
  deps: Pick<AcceptSendDeps, 'caches'>,
  error: unknown,
  teamId: string,
  templateId: string,
): unknown {
  if (!isForeignKeyViolation(error, LOG_TEMPLATE_FK)) return error;
  deps.caches.templatesForSend.forgetTeam(teamId);
  return new AppError('INVALID_TEMPLATE', `Template "${templateId}" not found`, { templateId });
}

/**
 * Everything of {@link acceptSend} before the write: resolves and checks, renders, and returns the
 * rows to commit and the answer to give once they are. The batch endpoint commits many at once.
 * @throws as {@link acceptSend}; VALIDATION_ERROR (400, reason UNKNOWN_ADAPTER or
 *   ADAPTER_DISABLED) for an `adapterId` that is not one of the team's active adapters;
 *   FILE_TOO_LARGE (400) past the PDF byte limits (send-pdfs.ts; `options.pdfBudget` is a batch's).
 */
export async function prepareSend(
  deps: AcceptSendDeps,
  caller: { teamId: string; apiKeyId: string | null },
  input: SendInput,
  origin: SendOrigin = {},
  options: { pdfBudget?: PdfByteBudget } = {},
): Promise<{ rows: AcceptedEmailRows; accepted: AcceptedSend }> {
  const to = Array.isArray(input.to) ? input.to : [input.to];
  const variables = input.variables ?? {};
  const { template, version } = await cachedTemplateForSend(
    deps.db,
    deps.caches.templatesForSend,
    caller.teamId,
    input.templateId,
  );
  const adapter = input.adapterId
    ? await namedAdapter(deps.db, caller.teamId, input.adapterId)
    : await cachedSendingAdapter(deps.db, deps.caches.adaptersForSend, caller.teamId);
  refuseTagsTheProviderRefuses(adapter.type, input.tags);
  const skipTemplatePdf = origin.copyAttachmentsOf !== undefined;
  const wantsPdfs = sendWantsPdfs(input, version, { skipTemplatePdf });
  const from = input.from ?? adapter.defaultFrom;
  if (!from) {
    throw new AppError('VALIDATION_ERROR', 'No sender: pass "from" or set the adapter\'s defaultFrom', {
      reason: 'NO_SENDER',
      issues: [{ path: 'body.from', message: 'required when the adapter has no defaultFrom' }],
    });
  }
  const rendered = await renderTemplateHtml(
    { subject: version.subject, designJson: version.designJson, cacheKey: version.id },
    variables,
  );
  const subject =
    input.subject === undefined ? rendered.subject : renderSubjectLine(input.subject, variables);
  refuseLongSubject(subject, input.subject !== undefined);
  // Issue #12: PDFs render last (after every cheap check) and only when asked for. A server without a
  // renderer says so there (renderSendPdfs: PDF_NOT_CONFIGURED), after the request's own mistakes
  // (no sender, errors of the email's template), which its client can fix (a 500 hid them).
  const attachmentBytes = (input.attachments ?? []).reduce(
    (sum, file) => sum + Buffer.byteLength(file.content, 'base64'),
    0,
  );
  const pdfs = wantsPdfs
    ? await renderSendPdfs(
        deps,
        caller.teamId,
        input,
        {
          template,
          version,
          html: rendered.html,
          variables,
          skipTemplatePdf,
        },
        {
          attachmentBytes,
          batch: options.pdfBudget,
        },
      )
    : undefined;
  refuseTooLargeForProvider(
    adapter.type,
    attachmentBytes + (pdfs ?? []).reduce((sum, pdf) => sum + pdf.content.length, 0),
    rendered.html,
  );
  const id = newId('emailLog');
  const { jobId, uuid } = newJobId();
  const extra = sendFieldRows({ emailId: id, teamId: caller.teamId }, input, {
    copyAttachmentsOf: origin.copyAttachmentsOf,
    ...(origin.attachmentCount !== undefined ? { attachmentCount: origin.attachmentCount } : {}),
    ...(pdfs ? { pdfs } : {}),
  });
  const rows: AcceptedEmailRows = {
    log: {
      id,
      teamId: caller.teamId,
      templateId: template.id,
      templateName: template.name,
      templateVersionId: version.id,
      adapterId: adapter.id,
      apiKeyId: caller.apiKeyId,
      toAddresses: to,
      fromAddress: from,
      subject,
      variables,
      status: 'queued',
      jobId,
      ...(pdfs?.length || origin.hasPdfAttachment ? { hasPdfAttachment: true } : {}),
    },
    eventDetail: origin.resendOf ? { resendOf: origin.resendOf } : {},
    job: {
      id: uuid,
      data: {
        emailId: id,
        teamId: caller.teamId,
        ...(extra.fields ? { fields: extra.fields } : {}),
      },
      startAfter: extra.scheduledAt,
    },
    fields: extra.rows,
  };
  return { rows, accepted: { id, jobId, status: 'queued' } };
}

/** The team's adapter `adapterId` (issue #10 `adapterId`). @throws VALIDATION_ERROR when absent or disabled. */
async function namedAdapter(db: Database, teamId: string, adapterId: string): Promise<AdapterRow> {
  const adapter = (await findAdapters(db, [{ teamId, id: adapterId }])).get(adapterId);
  if (!adapter) throw unknownAdapterError(adapterId, 'not found');
  if (!adapter.isActive) throw unknownAdapterError(adapterId, 'disabled');
  return adapter;
}
