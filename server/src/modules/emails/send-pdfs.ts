import type { Database } from '../../db/client.ts';
import { AppError } from '../../http/errors.ts';
import { type PdfRenderer, printableHtml, RenderFailedError, sanitisePdfFilename } from '../pdf/index.ts';
import { renderTemplateHtml } from '../rendering/index.ts';
import {
  cachedTemplateForSend,
  type TemplateRow,
  type TemplateSendCache,
  type TemplateVersionRow,
} from '../templates/index.ts';

/** Most `pdfAttachments` of one send (issue #12: ≤ 5 PDFs; a generatePdf template's own comes on top). */
export const MAX_PDF_ATTACHMENTS = 5;

/**
 * Bytes one email's attachments and PDFs may hold together, decoded (25 MiB, the limit of Gmail and
 * Mailgun; Postmark takes 10 MB, SendGrid 30, SES and Resend 40). The request's own attachments
 * are bounded at 10 MB, but up to six PDFs of 10 MB each came on top: 4 batch items held 49.5 MB
 * each, and one batch request could hold gigabytes until its commit (review finding, session 15).
 */
export const MAX_EMAIL_FILE_BYTES = 25 * 1024 * 1024;
/** PDF bytes one batch request may render in all (its items are held until one transaction). */
export const MAX_BATCH_PDF_BYTES = 50 * 1024 * 1024;

/**
 * What a batch request may still render, shared by its items ({@link MAX_BATCH_PDF_BYTES}); its
 * items render their PDFs one item after another (`turn`), so the budget goes to whole items in
 * the order they come, not a part of each to every item rendering at once.
 */
export interface PdfByteBudget {
  remainingBytes: number;
  turn: Promise<void>;
}

/** A fresh {@link PdfByteBudget} for one batch request. */
export function batchPdfBudget(): PdfByteBudget {
  return { remainingBytes: MAX_BATCH_PDF_BYTES, turn: Promise.resolve() };
}

/** One PDF rendered for a send, stored with it like an attachment (send-fields.ts). */
export interface RenderedPdf {
  filename: string;
  content: Buffer;
}

/** What {@link renderSendPdfs} reads: the database, the send cache of templates and the renderer. */
export interface SendPdfDeps {
  db: Database;
  caches: { templatesForSend: TemplateSendCache };
  pdf: PdfRenderer | undefined;
}

/** A send's PDF requests as the body gives them (emails.schema.ts `pdfAttachments`). */
export interface PdfAttachmentInput {
  templateId: string;
  filename: string;
  variables?: Record<string, unknown> | undefined;
}

/** True when a send asks for any PDF: `pdfAttachments`, or a template with generatePdf (no I/O). */
export function sendWantsPdfs(
  input: { pdfAttachments?: readonly PdfAttachmentInput[] | undefined },
  version: Pick<TemplateVersionRow, 'generatePdf'>,
  options: { skipTemplatePdf: boolean },
): boolean {
  return (input.pdfAttachments?.length ?? 0) > 0 || (version.generatePdf && !options.skipTemplatePdf);
}

/**
 * Renders the PDFs of one send at accept (issue #12; spec "POST /api/v1/send" and case rules 5-6):
 * first the email template's own when its version has generatePdf (named `pdfFilename` or
 * `<slug>.pdf`, from the email's already rendered `html`), then each of `pdfAttachments` in order,
 * one after another, each from its template's current version with its own `variables` or else the
 * email's. File names are sanitised and end in `.pdf`. The bytes are returned to be stored with the
 * log, so the worker sends them as attachments and never renders a PDF itself.
 * Call only when {@link sendWantsPdfs}: a send without PDFs costs nothing here.
 * @returns the PDFs in attachment order.
 * @throws PDF_NOT_CONFIGURED (500, details.reason PDF_RENDERER_URL_NOT_SET) without a renderer
 *   (case rule 6); INVALID_TEMPLATE (400) for an attachment template that is missing, inactive or
 *   another team's, or that does not render with its variables (details.pdfAttachment = its index);
 *   PDF_GENERATION_FAILED (500) when the renderer is unreachable, times out, fails or returns more
 *   than 10 MB (case rule 5; details.cause RENDERER_UNREACHABLE, RENDERER_TIMEOUT, RENDERER_ERROR or
 *   PDF_TOO_LARGE, with the renderer's message, the template and file name); FILE_TOO_LARGE (400,
 *   details.reason EMAIL_TOO_LARGE) when `limits.attachmentBytes` and the PDFs pass
 *   MAX_EMAIL_FILE_BYTES, or (BATCH_TOO_LARGE) when the batch's `limits.batch` budget is spent.
 */
export async function renderSendPdfs(
  deps: SendPdfDeps,
  teamId: string,
  input: { pdfAttachments?: readonly PdfAttachmentInput[] | undefined },
  email: {
    template: Pick<TemplateRow, 'id' | 'slug'>;
    version: Pick<TemplateVersionRow, 'generatePdf' | 'pdfFilename'>;
    html: string;
    variables: Record<string, unknown>;
    skipTemplatePdf: boolean;
  },
  limits: { attachmentBytes: number; batch?: PdfByteBudget | undefined } = { attachmentBytes: 0 },
): Promise<RenderedPdf[]> {
  const renderer = deps.pdf;
  if (!renderer) {
    throw new AppError('PDF_NOT_CONFIGURED', 'PDF rendering service is not configured', {
      reason: 'PDF_RENDERER_URL_NOT_SET',
    });
  }
  const jobs: { templateId: string; filename: string; html: () => Promise<string> }[] = [];
  if (email.version.generatePdf && !email.skipTemplatePdf) {
    jobs.push({
      templateId: email.template.id,
      filename: sanitisePdfFilename(email.version.pdfFilename ?? email.template.slug),
      html: async () => email.html,
    });
  }
  // Every attachment template is resolved before anything is rendered: a bad one fails at once.
  const attachments = input.pdfAttachments ?? [];
  const resolved = await Promise.all(
    attachments.map((attachment, index) =>
      cachedTemplateForSend(deps.db, deps.caches.templatesForSend, teamId, attachment.templateId).catch(
        (error: unknown) => {
          throw attachmentError(error, index);
        },
      ),
    ),
  );
  attachments.forEach((attachment, index) => {
    const { version } = resolved[index]!;
    jobs.push({
      templateId: resolved[index]!.template.id,
      filename: sanitisePdfFilename(attachment.filename),
      html: async () => {
        try {
          const rendered = await renderTemplateHtml(
            { subject: version.subject, designJson: version.designJson, cacheKey: version.id },
            attachment.variables ?? email.variables,
          );
          return rendered.html;
        } catch (error) {
          throw attachmentError(error, index);
        }
      },
    });
  });
  const batch = limits.batch;
  if (!batch) return renderInOrder(renderer, teamId, jobs, limits.attachmentBytes, undefined);
  let release: () => void = () => {};
  const previous = batch.turn;
  batch.turn = new Promise<void>((resolve) => {
    release = resolve;
  });
  await previous;
  try {
    return await renderInOrder(renderer, teamId, jobs, limits.attachmentBytes, batch);
  } finally {
    release();
  }
}

/** Renders `jobs` one after another, within the byte limits (see {@link renderSendPdfs}). */
async function renderInOrder(
  renderer: PdfRenderer,
  teamId: string,
  jobs: readonly { templateId: string; filename: string; html: () => Promise<string> }[],
  attachmentBytes: number,
  batch: PdfByteBudget | undefined,
): Promise<RenderedPdf[]> {
  const pdfs: RenderedPdf[] = [];
  let bytes = attachmentBytes;
  for (const job of jobs) {
    if (batch && batch.remainingBytes <= 0) throw batchTooLarge();
    const html = await job.html();
    try {
      const content = await renderer.renderPdf(printableHtml(html), teamId);
      pdfs.push({ filename: job.filename, content });
      bytes += content.length;
      if (batch) batch.remainingBytes -= content.length;
      if (bytes > MAX_EMAIL_FILE_BYTES) {
        throw new AppError(
          'FILE_TOO_LARGE',
          `The email's attachments and PDFs hold more than ${MAX_EMAIL_FILE_BYTES} bytes together`,
          { reason: 'EMAIL_TOO_LARGE', maxBytes: MAX_EMAIL_FILE_BYTES, filename: job.filename },
        );
      }
      if (batch && batch.remainingBytes < 0) throw batchTooLarge();
    } catch (error) {
      if (!(error instanceof RenderFailedError)) throw error;
      throw new AppError('PDF_GENERATION_FAILED', `PDF generation failed: ${error.message}`, {
        cause: error.failure,
        message: error.message,
        ...(error.status !== undefined ? { rendererStatus: error.status } : {}),
        templateId: job.templateId,
        filename: job.filename,
      });
    }
  }
  return pdfs;
}

function batchTooLarge(): AppError {
  return new AppError(
    'FILE_TOO_LARGE',
    `The batch's PDFs hold more than ${MAX_BATCH_PDF_BYTES} bytes together`,
    {
      reason: 'BATCH_TOO_LARGE',
      maxBytes: MAX_BATCH_PDF_BYTES,
    },
  );
}

/** An INVALID_TEMPLATE of attachment `index`, naming it in details (other errors as they are). */
function attachmentError(error: unknown, index: number): unknown {
  if (!(error instanceof AppError) || error.code !== 'INVALID_TEMPLATE') return error;
  return new AppError('INVALID_TEMPLATE', `pdfAttachments[${index}]: ${error.message}`, {
    ...error.details,
    pdfAttachment: index,
    path: `body.pdfAttachments.${index}.templateId`,
  });
}
