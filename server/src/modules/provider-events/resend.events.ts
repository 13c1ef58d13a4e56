import {
  badPayload,
  badSignature,
  configString,
  dateOf,
  header,
  jsonBody,
  obj,
  type ProviderEvent,
  type ProviderEventKind,
  type ProviderEventParser,
  str,
} from './provider-event.ts';

/**
 * Resend webhooks (https://resend.com/docs/dashboard/webhooks/introduction, event types and payload
 * at https://resend.com/docs/dashboard/webhooks/event-types): one JSON event per request,
 * `{type: 'email.delivered', created_at, data: {email_id, to: [...], bounce?: {type, subType,
 * message}, click?: {link}}}`; `data.email_id` is the id the send answered.
 *
 * Signed by Svix (https://docs.svix.com/receiving/verifying-payloads/how-manual): headers
 * `svix-id`, `svix-timestamp`, `svix-signature` (`v1,<base64>` entries, space separated) =
 * HMAC-SHA256 over `<id>.<timestamp>.<body>` keyed with the base64 secret after `whsec_`, refused
 * 5 minutes away from now. That is the Standard Webhooks scheme, so the `standardwebhooks` package
 * verifies it under its header names.
 */

/** The recorded kind of each Resend event type (a Map: types come from the payload). */
const KINDS = new Map<string, ProviderEventKind>([
  ['email.delivered', 'delivered'],
  ['email.opened', 'opened'],
  ['email.clicked', 'clicked'],
  ['email.complained', 'spam'],
  ['email.delivery_delayed', 'deferral'],
  ['email.failed', 'failed'],
]);

async function verify(secret: string, request: Parameters<ProviderEventParser>[0]): Promise<void> {
  const id = header(request, 'svix-id');
  const timestamp = header(request, 'svix-timestamp');
  const signature = header(request, 'svix-signature');
  if (!id || !timestamp || !signature) throw badSignature('Missing Svix signature headers');
  const { Webhook } = await import('standardwebhooks');
  let webhook: InstanceType<typeof Webhook>;
  try {
    webhook = new Webhook(secret);
  } catch {
    throw badSignature('The configured Resend webhook secret is not a whsec_ secret');
  }
  try {
    webhook.verify(request.body, {
      'webhook-id': id,
      'webhook-timestamp': timestamp,
      'webhook-signature': signature,
    });
  } catch {
    throw badSignature();
  }
}

/**
 * Parses (and verifies, with `config.webhookSecret`) one Resend webhook request.
 * An event not about an email (`contact.*`, `domain.*`, any without `data.email_id`) is
 * acknowledged with nothing recorded: a 4xx would only make Svix retry it and, after enough
 * failures, disable the endpoint (https://docs.svix.com/retries).
 * @throws AppError UNAUTHORIZED (401) for a wrong signature; VALIDATION_ERROR (400) for a body
 *   without `type`.
 */
export const parseResendEvents: ProviderEventParser = async (request) => {
  const secret = configString(request.config, 'webhookSecret');
  if (secret) await verify(secret, request);
  const body = obj(jsonBody(request));
  const type = str(body.type);
  if (!type) throw badPayload('Not a Resend event (type)');
  const data = obj(body.data);
  const emailId = str(data.email_id);
  if (!emailId) return [];
  // `data.to` is the email's `to` list (cc and bcc are not in it), not the address the event is
  // about: Resend's events name no recipient. Pinning a bounce on a lone `to` address suppressed it
  // for a bounce of a cc'd one (review finding, session 17); an event naming none applies to the
  // whole email, and suppresses its address only when it has a single recipient.
  const base = { messageIds: [emailId], at: dateOf(body.created_at), recipients: [], providerEvent: type };
  if (type === 'email.bounced') {
    const bounce = obj(data.bounce);
    const diagnostic = str(bounce.message) ?? str(bounce.subType) ?? 'Bounced';
    // Resend passes on SES's bounce types: Permanent = hard; Transient and Undetermined = soft.
    const kind: ProviderEventKind = bounce.type === 'Permanent' ? 'bounced' : 'soft_bounce';
    return [{ ...base, kind, diagnostic } satisfies ProviderEvent];
  }
  const kind = KINDS.get(type);
  if (!kind) return []; // email.sent, email.scheduled, …: nothing to record.
  const event: ProviderEvent = { ...base, kind };
  const url = str(obj(data.click).link);
  if (kind === 'clicked' && url) event.url = url;
  if (kind === 'failed') event.diagnostic = str(obj(data.failed).reason) ?? 'Failed';
  return [event];
};
