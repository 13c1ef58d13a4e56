import type { Database } from '../../db/client.ts';
import { isForeignKeyViolation } from '../../db/errors.ts';
import { AppError } from '../../http/errors.ts';
import { newId, newJobId } from '../../ids.ts';
import { type AdapterSendCache, cachedSendingAdapter } from '../adapters/index.ts';
import { renderTemplate } from '../rendering/index.ts';
import { cachedTemplateForSend, type TemplateSendCache } from '../templates/index.ts';
import type { AcceptBatcher } from './accept-batcher.ts';
import type { SendInput } from './emails.schema.ts';

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
 * Rendered once: the subject goes into the log, the HTML and text part into the job, which the
 * worker sends as they are (the log keeps the version id and variables, so it can be re-rendered
 * exactly later).
 * `caller.apiKeyId` is null for sends from the dashboard (resend); `origin.resendOf` is kept in the
 * first status event.
 * @throws INVALID_TEMPLATE (400) unknown/inactive/deleted template or a render error;
 *   VALIDATION_ERROR (400) with details.reason NO_ACTIVE_ADAPTER or NO_SENDER;
 *   PDF_NOT_CONFIGURED (500) when a PDF is requested (spec case rule 6: no renderer is configured);
 *   a database data exception for values PostgreSQL cannot store (mapped to 400 INVALID_INPUT).
 */
export async function acceptSend(
  deps: AcceptSendDeps,
  caller: { teamId: string; apiKeyId: string | null },
  input: SendInput,
  origin: { resendOf?: string } = {},
): Promise<AcceptedSend> {
  const to = Array.isArray(input.to) ? input.to : [input.to];
  const variables = input.variables ?? {};
  const { template, version } = await cachedTemplateForSend(
    deps.db,
    deps.caches.templatesForSend,
    caller.teamId,
    input.templateId,
  );
  const adapter = await cachedSendingAdapter(deps.db, deps.caches.adaptersForSend, caller.teamId);
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
  try {
    await deps.acceptBatcher.submit({
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
        data: { emailId: id, teamId: caller.teamId, rendered: { html: rendered.html, text: rendered.text } },
      },
    });
  } catch (error) {
    if (!isForeignKeyViolation(error, LOG_TEMPLATE_FK)) throw error;
    // The template was deleted after it was resolved (a concurrent delete, or through another
    // process while it was cached): nothing was written for this send.
    deps.caches.templatesForSend.forgetTeam(caller.teamId);
    throw new AppError('INVALID_TEMPLATE', `Template "${input.templateId}" not found`, {
      templateId: input.templateId,
    });
  }
  return { id, jobId, status: 'queued' };
}
