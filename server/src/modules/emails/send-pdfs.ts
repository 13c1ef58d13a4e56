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
 *   PDF_TOO_LARGE, with the renderer's message, the template and file name).
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
  const pdfs: RenderedPdf[] = [];
  for (const job of jobs) {
    const html = await job.html();
    try {
      pdfs.push({ filename: job.filename, content: await renderer.renderPdf(printableHtml(html), teamId) });
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

/** An INVALID_TEMPLATE of attachment `index`, naming it in details (other errors as they are). */
function attachmentError(error: unknown, index: number): unknown {
  if (!(error instanceof AppError) || error.code !== 'INVALID_TEMPLATE') return error;
  return new AppError('INVALID_TEMPLATE', `pdfAttachments[${index}]: ${error.message}`, {
    ...error.details,
    pdfAttachment: index,
    path: `body.pdfAttachments.${index}.templateId`,
  });
}
