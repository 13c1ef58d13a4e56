import type { Config } from '../../config.ts';
import type { Database } from '../../db/client.ts';
import { isForeignKeyViolation } from '../../db/errors.ts';
import { AppError } from '../../http/errors.ts';
import { newId, newJobId } from '../../ids.ts';
import type { JobQueue } from '../../jobs/queue.ts';
import { cachedSendingAdapter } from '../adapters/index.ts';
import { renderTemplateHtml } from '../rendering/index.ts';
import { cachedTemplateForSend, forgetTeamTemplates } from '../templates/index.ts';
import { acceptBatcherFor } from './accept-batcher.ts';
import type { SendInput } from './emails.schema.ts';

/** What `POST /api/v1/send` answers (spec: data = {id, jobId, status: "queued"}). */
export interface AcceptedSend {
  id: string;
  jobId: string;
  status: 'queued';
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
 * not this render. The job carries no HTML: the worker renders subject, HTML and text part again
 * from the log's version and variables, which costs less than writing the HTML into the job row
 * and reading it back. This render refuses, before anything is written, a template that does not
 * render with these variables, and gives the log its subject.
 * `caller.apiKeyId` is null for sends from the dashboard (resend); `origin.resendOf` is kept in the
 * first status event.
 * @throws INVALID_TEMPLATE (400) unknown/inactive/deleted template or a render error;
 *   VALIDATION_ERROR (400) with details.reason NO_ACTIVE_ADAPTER or NO_SENDER;
 *   PDF_NOT_CONFIGURED (500) when a PDF is requested (spec case rule 6: no renderer is configured);
 *   a database data exception for values PostgreSQL cannot store (mapped to 400 INVALID_INPUT).
 */
export async function acceptSend(
  deps: { db: Database; queue: JobQueue; config: Config },
  caller: { teamId: string; apiKeyId: string | null },
  input: SendInput,
  origin: { resendOf?: string } = {},
): Promise<AcceptedSend> {
  const to = Array.isArray(input.to) ? input.to : [input.to];
  const variables = input.variables ?? {};
  const { template, version } = await cachedTemplateForSend(deps.db, caller.teamId, input.templateId);
  const adapter = await cachedSendingAdapter(deps.db, caller.teamId);
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
  const rendered = await renderTemplateHtml(
    { subject: version.subject, designJson: version.designJson, cacheKey: version.id },
    variables,
  );
  const id = newId('emailLog');
  const { jobId, uuid } = newJobId();
  try {
    await acceptBatcherFor(deps).submit({
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
        subject: rendered.subject,
        variables,
        status: 'queued',
        jobId,
      },
      eventDetail: origin.resendOf ? { resendOf: origin.resendOf } : {},
      job: {
        id: uuid,
        data: { emailId: id, teamId: caller.teamId },
      },
    });
  } catch (error) {
    if (!isForeignKeyViolation(error, LOG_TEMPLATE_FK)) throw error;
    // The template was deleted after it was resolved (a concurrent delete, or through another
    // process while it was cached): nothing was written for this send.
    forgetTeamTemplates(caller.teamId);
    throw new AppError('INVALID_TEMPLATE', `Template "${input.templateId}" not found`, {
      templateId: input.templateId,
    });
  }
  return { id, jobId, status: 'queued' };
}
