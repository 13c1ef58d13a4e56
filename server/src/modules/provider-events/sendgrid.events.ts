import { createPublicKey, verify as verifySignature } from 'node:crypto';
import {
  badPayload,
  badSignature,
  configString,
  dateOf,
  header,
  isFreshTimestamp,
  jsonBody,
  obj,
  type ProviderEvent,
  type ProviderEventKind,
  type ProviderEventParser,
  str,
} from './provider-event.ts';

/**
 * SendGrid Event Webhook (https://www.twilio.com/docs/sendgrid/for-developers/tracking-events/event):
 * a JSON array of events `{email, timestamp (s), event, sg_message_id, sg_event_id, reason?,
 * type?}` per request. `sg_message_id` is the send's `X-Message-Id` followed by `.filter…`, so the
 * part before the first dot is tried as well.
 *
 * Signed webhook (https://www.twilio.com/docs/sendgrid/for-developers/tracking-events/getting-started-event-webhook-security-features):
 * ECDSA P-256 with SHA-256 over `<X-Twilio-Email-Event-Webhook-Timestamp><raw body>`, signature
 * base64 DER in `X-Twilio-Email-Event-Webhook-Signature`, verified with the public key SendGrid
 * shows (base64 DER SubjectPublicKeyInfo; a PEM is accepted too). The page asks to refuse a
 * timestamp too far from now, so an old signed batch cannot be replayed: more than
 * {@link SENDGRID_TIMESTAMP_WINDOW_MS} either way is refused.
 */

/** How far the signed timestamp may be from now (ms), either way. */
export const SENDGRID_TIMESTAMP_WINDOW_MS = 5 * 60_000;

/** The recorded kind of each SendGrid event name (a Map: names come from the payload). */
const KINDS = new Map<string, ProviderEventKind>([
  ['delivered', 'delivered'],
  ['open', 'opened'],
  ['click', 'clicked'],
  ['spamreport', 'spam'],
  ['deferred', 'deferral'],
  ['dropped', 'failed'],
]);

function publicKeyOf(text: string) {
  try {
    return text.includes('-----BEGIN')
      ? createPublicKey(text)
      : createPublicKey({ key: Buffer.from(text, 'base64'), format: 'der', type: 'spki' });
  } catch {
    throw badSignature('The configured SendGrid verification key is not a public key');
  }
}

/**
 * Checks the request's ECDSA signature with `publicKey`, and that its timestamp is fresh.
 * @throws AppError UNAUTHORIZED (401) for missing headers, a timestamp more than
 *   {@link SENDGRID_TIMESTAMP_WINDOW_MS} from now, an unusable key, or a wrong signature.
 */
function verify(publicKey: string, request: Parameters<ProviderEventParser>[0]): void {
  const signature = header(request, 'x-twilio-email-event-webhook-signature');
  const timestamp = header(request, 'x-twilio-email-event-webhook-timestamp');
  if (!signature || !timestamp) throw badSignature('Missing SendGrid signature headers');
  if (!isFreshTimestamp(timestamp, SENDGRID_TIMESTAMP_WINDOW_MS)) {
    throw badSignature('SendGrid signature timestamp is too old or in the future');
  }
  const key = publicKeyOf(publicKey);
  const signed = Buffer.concat([Buffer.from(timestamp, 'utf8'), request.body]);
  let valid = false;
  try {
    valid = verifySignature('sha256', signed, { key, dsaEncoding: 'der' }, Buffer.from(signature, 'base64'));
  } catch {
    valid = false;
  }
  if (!valid) throw badSignature();
}

/** Parses (and verifies, with `config.webhookPublicKey`) one SendGrid Event Webhook request. */
export const parseSendGridEvents: ProviderEventParser = async (request) => {
  const publicKey = configString(request.config, 'webhookPublicKey');
  if (publicKey) verify(publicKey, request);
  const body = jsonBody(request);
  if (!Array.isArray(body)) throw badPayload('Not a SendGrid event batch (a JSON array)');
  const events: ProviderEvent[] = [];
  for (const item of body) {
    const raw = obj(item);
    const id = str(raw.sg_message_id);
    const name = str(raw.event);
    if (!id || !name) continue;
    const messageIds = [id, ...(id.includes('.') ? [id.slice(0, id.indexOf('.'))] : [])];
    const email = str(raw.email);
    const base = {
      messageIds,
      at: dateOf(raw.timestamp),
      recipients: email ? [email] : [],
      providerEvent: name,
    };
    if (name === 'bounce') {
      // type "bounce" = the receiving server refused the address (hard); "blocked" = a temporary
      // block, e.g. reputation or content (soft).
      const kind: ProviderEventKind = raw.type === 'blocked' ? 'soft_bounce' : 'bounced';
      events.push({ ...base, kind, diagnostic: str(raw.reason) ?? str(raw.status) ?? 'Bounced' });
      continue;
    }
    const kind = KINDS.get(name);
    if (!kind) continue; // processed, unsubscribe, group_*: nothing to record.
    const event: ProviderEvent = { ...base, kind };
    if (kind === 'clicked' && str(raw.url)) event.url = str(raw.url)!;
    if (kind === 'failed' || kind === 'deferral') event.diagnostic = str(raw.reason) ?? name;
    events.push(event);
  }
  return events;
};
