import type { Config } from '../../config.ts';
import type { Database } from '../../db/client.ts';
import { AppError } from '../../http/errors.ts';
import { newId, newJobId } from '../../ids.ts';
import { EMAIL_SEND_JOB, type JobPayload } from '../../jobs/definitions.ts';
import type { JobQueue } from '../../jobs/queue.ts';
import { resolveSendingAdapter } from '../adapters/index.ts';
import { renderTemplate } from '../rendering/index.ts';
import { resolveTemplateForSend } from '../templates/index.ts';
import { emailRepository } from './emails.repository.ts';
import type { SendInput } from './emails.schema.ts';

/** What `POST /api/v1/send` answers (spec: data = {id, jobId, status: "queued"}). */
export interface AcceptedSend {
  id: string;
  jobId: string;
  status: 'queued';
}

/**
 * Accepts a send (ARCHITECTURE.md "The send path" 1-2): resolves the template (id or slug) and
 * the team's sending adapter, checks PDF preconditions, renders subject and HTML to fail fast, then
 * writes the email log, its first status event and the `email.send` job in ONE transaction — an
 * accepted email always has a log and a job.
 * `caller.apiKeyId` is null for sends from the dashboard (resend); `origin.resendOf` is kept in the
 * first status event.
 * @throws INVALID_TEMPLATE (400) unknown/inactive template or a render error;
 *   VALIDATION_ERROR (400) with details.reason NO_ACTIVE_ADAPTER or NO_SENDER;
 *   PDF_NOT_CONFIGURED (500) when a PDF is requested (spec case rule 6: no renderer is configured).
 */
export async function acceptSend(
  deps: { db: Database; queue: JobQueue; config: Config },
  caller: { teamId: string; apiKeyId: string | null },
  input: SendInput,
  origin: { resendOf?: string } = {},
): Promise<AcceptedSend> {
  const to = Array.isArray(input.to) ? input.to : [input.to];
  const variables = input.variables ?? {};
  return deps.db.transaction(async (tx) => {
    const { template, version } = await resolveTemplateForSend(tx, caller.teamId, input.templateId);
    const adapter = await resolveSendingAdapter(tx, caller.teamId);
    if ((input.pdfAttachments?.length ?? 0) > 0 || version.generatePdf) {
      throw new AppError('PDF_NOT_CONFIGURED', 'PDF rendering service is not configured', {
        reason: 'PDF_RENDERER_URL_NOT_SET',
      });
    }
    const from = input.from ?? adapter.defaultFrom;
    if (!from) {
      throw new AppError('VALIDATION_ERROR', 'No sender: pass "from" or set the adapter\'s defaultFrom', {
        reason: 'NO_SENDER',
        issues: [{ path: 'body.from', message: 'required when the adapter has no defaultFrom' }],
      });
    }
    const rendered = await renderTemplate(
      { subject: version.subject, designJson: version.designJson, cacheKey: version.id },
      variables,
    );
    const id = newId('emailLog');
    const { jobId, uuid } = newJobId();
    const log = await emailRepository.insertLog(tx, {
      id,
      teamId: caller.teamId,
      templateId: template.id,
      templateName: template.name,
      templateVersionId: version.id,
      adapterId: adapter.id,
      apiKeyId: caller.apiKeyId,
      toAddresses: to,
      fromAddress: from,
      subject: rendered.subject,
      variables,
      status: 'queued',
      jobId,
    });
    await emailRepository.insertEvent(tx, {
      teamId: caller.teamId,
      emailId: id,
      status: 'queued',
      occurredAt: log.createdAt,
      ...(origin.resendOf ? { detail: { resendOf: origin.resendOf } } : {}),
    });
    const payload: JobPayload<'email.send'> = { emailId: id, teamId: caller.teamId };
    await deps.queue.enqueue(tx, EMAIL_SEND_JOB, payload, uuid);
    return { id, jobId, status: 'queued' as const };
  });
}
