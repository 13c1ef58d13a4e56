import { createHmac, timingSafeEqual } from 'node:crypto';
import {
  badPayload,
  badSignature,
  configString,
  dateOf,
  jsonBody,
  obj,
  type ProviderEvent,
  type ProviderEventKind,
  type ProviderEventParser,
  str,
} from './provider-event.ts';

/**
 * Mailgun webhooks (https://documentation.mailgun.com/docs/mailgun/user-manual/events/webhooks):
 * one JSON `{signature: {timestamp, token, signature}, "event-data": {event, timestamp (s),
 * recipient, severity?, reason?, "delivery-status"?: {message, description, code},
 * message: {headers: {"message-id"}}}}` per request. The send answered the id in angle brackets
 * (`<…@domain>`), the event carries it without: both are tried.
 *
 * Signature: hex HMAC-SHA256 of `<timestamp><token>` keyed with the HTTP webhook signing key
 * (https://documentation.mailgun.com/docs/mailgun/user-manual/events/webhooks#securing-webhooks).
 */

function verify(signingKey: string, signature: Record<string, unknown>): void {
  const timestamp =
    str(signature.timestamp) ??
    (typeof signature.timestamp === 'number' ? String(signature.timestamp) : undefined);
  const token = str(signature.token);
  const given = str(signature.signature);
  if (!timestamp || !token || !given) throw badSignature('Missing Mailgun signature');
  const expected = createHmac('sha256', signingKey)
    .update(timestamp + token)
    .digest('hex');
  const a = Buffer.from(expected, 'utf8');
  const b = Buffer.from(given.toLowerCase(), 'utf8');
  if (a.length !== b.length || !timingSafeEqual(a, b)) throw badSignature();
}

/** Parses (and verifies, with `config.webhookSigningKey`) one Mailgun webhook request. */
export const parseMailgunEvents: ProviderEventParser = async (request) => {
  const body = obj(jsonBody(request));
  const signingKey = configString(request.config, 'webhookSigningKey');
  if (signingKey) verify(signingKey, obj(body.signature));
  const data = obj(body['event-data']);
  const name = str(data.event);
  const messageId = str(obj(obj(data.message).headers)['message-id']);
  if (!name || !messageId) throw badPayload('Not a Mailgun event (event-data.event, message-id)');
  const bare = messageId.replace(/^<|>$/g, '');
  const recipient = str(data.recipient);
  const base = {
    messageIds: [bare, `<${bare}>`],
    at: dateOf(data.timestamp),
    recipients: recipient ? [recipient] : [],
    providerEvent: name,
  };
  const status = obj(data['delivery-status']);
  const diagnostic = str(status.message) ?? str(status.description) ?? str(data.reason) ?? name;
  let kind: ProviderEventKind | undefined;
  if (name === 'delivered') kind = 'delivered';
  else if (name === 'opened') kind = 'opened';
  else if (name === 'clicked') kind = 'clicked';
  else if (name === 'complained') kind = 'spam';
  // "failed" with severity permanent = hard bounce (or a drop: Mailgun suppresses it too);
  // temporary = Mailgun retries it (a soft bounce).
  else if (name === 'failed') kind = data.severity === 'permanent' ? 'bounced' : 'soft_bounce';
  if (!kind) return []; // accepted, unsubscribed, stored: nothing to record.
  const event: ProviderEvent = { ...base, kind };
  if (kind === 'bounced' || kind === 'soft_bounce') event.diagnostic = diagnostic;
  if (kind === 'clicked' && str(data.url)) event.url = str(data.url)!;
  return [event];
};
