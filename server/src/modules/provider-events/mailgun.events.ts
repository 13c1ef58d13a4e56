import { createHmac, timingSafeEqual } from 'node:crypto';
import {
  badPayload,
  badSignature,
  configString,
  dateOf,
  isFreshTimestamp,
  jsonBody,
  obj,
  type ProviderEvent,
  type ProviderEventDeps,
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
 * It does not cover `event-data`, so a signature block once seen could vouch for any event: as
 * Mailgun's page asks, a timestamp more than {@link MAILGUN_SIGNATURE_WINDOW_MS} away from now is
 * refused, and so is a token already accepted for the adapter within that window (replays).
 * Tokens are claimed in the database (`deps.claimToken`, table `provider_event_tokens`), so every
 * process sees them.
 */

/** How far a signature's timestamp may be from now (ms), either way (Mailgun: "5 minutes"). */
export const MAILGUN_SIGNATURE_WINDOW_MS = 5 * 60_000;
/**
 * How long an accepted token is remembered (ms): a timestamp is accepted from 5 minutes before it
 * to 5 minutes after it, so a token seen at the earliest must be kept twice the window.
 */
export const MAILGUN_TOKEN_MEMORY_MS = 2 * MAILGUN_SIGNATURE_WINDOW_MS;
/**
 * Checks the signature block of a request to adapter `adapterId`, then that it is fresh and its
 * token new, and remembers the token.
 * @throws AppError UNAUTHORIZED (401) for a missing or wrong signature, a timestamp more than
 *   {@link MAILGUN_SIGNATURE_WINDOW_MS} from now, or a token already accepted (a replay).
 */
async function verify(
  signingKey: string,
  signature: Record<string, unknown>,
  adapterId: string,
  deps: ProviderEventDeps,
): Promise<void> {
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
  if (!isFreshTimestamp(timestamp, MAILGUN_SIGNATURE_WINDOW_MS)) {
    throw badSignature('Mailgun signature timestamp is too old or in the future');
  }
  // Claimed only once the signature verified, so unsigned requests write nothing.
  if (!(await deps.claimToken(adapterId, token, MAILGUN_TOKEN_MEMORY_MS))) {
    throw badSignature('Mailgun signature token already used');
  }
}

/**
 * Parses (and verifies, with `config.webhookSigningKey`: signature, freshness, replay) one Mailgun
 * webhook request.
 */
export const parseMailgunEvents: ProviderEventParser = async (request, deps) => {
  const body = obj(jsonBody(request));
  const signingKey = configString(request.config, 'webhookSigningKey');
  if (signingKey) await verify(signingKey, obj(body.signature), request.adapterId, deps);
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
