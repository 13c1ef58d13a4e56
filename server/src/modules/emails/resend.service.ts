import { AppError } from '../../http/errors.ts';
import { findAdapter } from '../adapters/index.ts';
import type { RateLimiter } from '../api-keys/index.ts';
import { getLog } from './logs.service.ts';
import { type AcceptedSend, type AcceptSendDeps, acceptSend } from './send.service.ts';
import { loadSendFields } from './send-fields.ts';

/** Statuses a resend may start from (spec "States and transitions"). */
const RESENDABLE = new Set(['failed', 'bounced']);

/**
 * Resends one team may make per minute. Each copies the original's stored attachments (up to
 * 25 MiB) in a request of a few bytes, and the original stays resendable: 40 concurrent resends of
 * one email with a 10 MB attachment grew the database by 416 MB in 1.5 s and slowed every team's
 * accepts (review finding, session 15). A person resending by hand never comes near it.
 */
export const RESENDS_PER_MINUTE_PER_TEAM = 30;

/**
 * `POST /api/logs/:id/resend`: queues a new email (new log, new job) with the original's template,
 * recipients, sender and variables, rendered from the template's current version, and its issue #10
 * fields (cc, bcc, replyTo, subject override, headers, tags, metadata, a copy of its attachments),
 * through the adapter it named while that is still the team's and active (else the team's current
 * sending adapter); sent now, not at the
 * original schedule. The original log is left as it is.
 * @throws NOT_FOUND (not the team's email, or deleted by LOG_RETENTION_DAYS before the resend
 *   committed its copy of the attachments: send-fields.ts writeSendFields); RATE_LIMITED (429) past RESENDS_PER_MINUTE_PER_TEAM;
 *   VALIDATION_ERROR (400) when the email is not `failed`
 *   or `bounced` (case rule 3, details.reason NOT_RESENDABLE) or its template was deleted (case
 *   rule 4, details.reason TEMPLATE_DELETED); any error of {@link acceptSend}.
 */
export async function resendEmail(
  deps: AcceptSendDeps & { rateLimiter: RateLimiter },
  teamId: string,
  emailId: string,
): Promise<AcceptedSend> {
  const original = await getLog(deps.db, teamId, emailId);
  if (!RESENDABLE.has(original.status)) {
    throw new AppError(
      'VALIDATION_ERROR',
      `Only failed or bounced emails can be resent (this one is ${original.status})`,
      {
        reason: 'NOT_RESENDABLE',
        status: original.status,
      },
    );
  }
  if (!original.templateId) {
    throw new AppError('VALIDATION_ERROR', 'The template of this email was deleted', {
      reason: 'TEMPLATE_DELETED',
    });
  }
  // Counted once the resend is prepared and about to be written: one the send path refuses
  // (inactive template or adapter, tags, subject) spends none of the team's budget (review finding,
  // session 16: 30 refused resends locked out a valid one for a minute).
  const countResend = async () => {
    const decision = await deps.rateLimiter.consume(`resend:${teamId}`, RESENDS_PER_MINUTE_PER_TEAM);
    if (!decision.allowed) {
      throw new AppError('RATE_LIMITED', `A team may resend at most ${decision.limit} emails per minute`, {
        limit: decision.limit,
        retryAfterSeconds: decision.resetSeconds,
      });
    }
  };
  const fields = await loadSendFields(deps.db, teamId, original.id);
  // The adapter the original named, when it is still there and active; otherwise the team's
  // sending adapter now, as for a send that names none: an email failed because its adapter was
  // deleted or disabled could not be resent at all, refused for a `body.adapterId` the resend has
  // no body for (review finding, session 18).
  const named = fields.adapterId ? await findAdapter(deps.db, teamId, fields.adapterId) : undefined;
  const adapterId = named?.isActive ? named.id : undefined;
  const optional = <T>(value: T | null, keep: boolean) => (keep && value !== null ? value : undefined);
  return acceptSend(
    deps,
    { teamId, apiKeyId: null },
    {
      templateId: original.templateId,
      to: original.toAddresses,
      from: original.fromAddress,
      variables: original.variables as Record<string, unknown>,
      cc: optional(fields.cc, fields.cc.length > 0),
      bcc: optional(fields.bcc, fields.bcc.length > 0),
      replyTo: optional(fields.replyTo, fields.replyTo.length > 0),
      subject: optional(fields.subjectTemplate, true),
      adapterId,
      headers: optional(fields.headers, Object.keys(fields.headers).length > 0),
      tags: optional(fields.tags, Object.keys(fields.tags).length > 0),
      metadata: optional(fields.metadata, Object.keys(fields.metadata).length > 0),
      trackOpens: optional(fields.trackOpens, true),
      trackClicks: optional(fields.trackClicks, true),
    },
    {
      resendOf: original.id,
      copyAttachmentsOf: original.id,
      attachmentCount: fields.attachments.length,
      hasPdfAttachment: original.hasPdfAttachment,
    },
    countResend,
  );
}
