import { type CallerFields, EMAIL_STATUSES, type StatusChangedEmail } from '../emails/index.ts';

/** Event names (spec "Events"): `email.<status>` for each email status. */
export const WEBHOOK_EVENTS = EMAIL_STATUSES.map((status) => `email.${status}` as const);
export type WebhookEvent = (typeof WEBHOOK_EVENTS)[number];

/** The statuses whose events carry `data.error` (spec "Events": failure-type events). */
const FAILURE_STATUSES = new Set(['failed', 'bounced']);

/**
 * The JSON body of an event (spec "Events", payload shape): `{event, timestamp, data: {emailId,
 * templateId (when the email has one), to, subject, status, error (failed and bounced only)}}`,
 * plus `data.metadata` and `data.tags` when the send carried them, and `data.recipients` (the
 * bare addresses the event concerns) when the provider event that moved the status named some
 * (issue #11).
 * @param email the email as its row reads after the change, with the send's metadata and tags
 *   (emails.callerFieldsOf) when it carried them.
 * @param at when the event occurred (ISO 8601 with milliseconds in the payload).
 */
export function eventPayload(email: StatusChangedEmail & CallerFields, at: Date): Record<string, unknown> {
  const data: Record<string, unknown> = { emailId: email.id };
  if (email.templateId) data.templateId = email.templateId;
  data.to = email.toAddresses;
  data.subject = email.subject;
  data.status = email.status;
  if (FAILURE_STATUSES.has(email.status)) data.error = email.errorMessage ?? null;
  // The send's caller-supplied fields (issue #11: metadata, tags), when it carried them.
  if (email.metadata) data.metadata = email.metadata;
  if (email.tags) data.tags = email.tags;
  // Issue #11: the recipients a provider event named (e.g. the one address that bounced).
  if (email.recipients?.length) data.recipients = email.recipients;
  return { event: `email.${email.status}`, timestamp: at.toISOString(), data };
}

/** A sample event for `POST /api/webhooks/:id/test`: an invented email, shaped as a real one. */
export function sampleEventPayload(event: WebhookEvent, at: Date): Record<string, unknown> {
  const status = event.slice('email.'.length) as StatusChangedEmail['status'];
  return eventPayload(
    {
      id: 'eml_00000000000000000000000000',
      teamId: '',
      templateId: 'tpl_00000000000000000000000000',
      toAddresses: ['recipient@example.com'],
      subject: 'Test event from Postwright',
      status,
      errorMessage: FAILURE_STATUSES.has(status) ? 'Sample error (test event)' : null,
    },
    at,
  );
}
