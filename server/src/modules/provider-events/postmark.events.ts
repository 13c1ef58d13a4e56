import { timingSafeEqual } from 'node:crypto';
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
  type ProviderEventRequest,
  str,
} from './provider-event.ts';

/**
 * Postmark webhooks (https://postmarkapp.com/developer/webhooks/webhooks-overview): one JSON event
 * per request, `RecordType` one of Delivery {MessageID, Recipient, DeliveredAt, Details}, Bounce
 * {MessageID, Type, Email, BouncedAt, Description, Details}, SpamComplaint {MessageID, Email,
 * BouncedAt}, Open {MessageID, Recipient, ReceivedAt}, Click {MessageID, Recipient, ReceivedAt,
 * OriginalLink}. `MessageID` is the id the send answered.
 *
 * Postmark does not sign webhooks; it authenticates with HTTP basic auth put in the webhook URL
 * and/or custom headers (https://postmarkapp.com/developer/webhooks/webhooks-overview#protecting-your-webhook).
 * Checked here when configured: `webhookUsername`/`webhookPassword` against `Authorization: Basic`,
 * `webhookToken` against the `X-Postmark-Webhook-Token` header.
 */

/** Bounce types that mean the address will not work (https://postmarkapp.com/developer/api/bounce-api#bounce-types). */
const HARD_BOUNCES = new Set(['HardBounce', 'BadEmailAddress', 'ManuallyDeactivated']);

function same(a: string, b: string): boolean {
  const x = Buffer.from(a, 'utf8');
  const y = Buffer.from(b, 'utf8');
  return x.length === y.length && timingSafeEqual(x, y);
}

function authenticate(request: ProviderEventRequest): void {
  const username = configString(request.config, 'webhookUsername');
  const password = configString(request.config, 'webhookPassword');
  const token = configString(request.config, 'webhookToken');
  if (username !== undefined || password !== undefined) {
    const authorization = header(request, 'authorization') ?? '';
    const match = /^Basic\s+(.+)$/i.exec(authorization);
    const given = match ? Buffer.from(match[1]!, 'base64').toString('utf8') : '';
    if (!same(given, `${username ?? ''}:${password ?? ''}`))
      throw badSignature('Invalid basic auth credentials');
  }
  if (token !== undefined && !same(header(request, 'x-postmark-webhook-token') ?? '', token)) {
    throw badSignature('Invalid X-Postmark-Webhook-Token');
  }
}

/** Parses (and authenticates, when configured) one Postmark webhook request. */
export const parsePostmarkEvents: ProviderEventParser = async (request) => {
  authenticate(request);
  const body = obj(jsonBody(request));
  const type = str(body.RecordType);
  const messageId = str(body.MessageID);
  if (!type || !messageId) throw badPayload('Not a Postmark webhook (RecordType, MessageID)');
  const recipient = str(body.Recipient) ?? str(body.Email);
  const base = { messageIds: [messageId], recipients: recipient ? [recipient] : [], providerEvent: type };
  let event: ProviderEvent | undefined;
  if (type === 'Delivery') event = { ...base, kind: 'delivered', at: dateOf(body.DeliveredAt) };
  else if (type === 'Open') event = { ...base, kind: 'opened', at: dateOf(body.ReceivedAt) };
  else if (type === 'Click') {
    event = { ...base, kind: 'clicked', at: dateOf(body.ReceivedAt) };
    if (str(body.OriginalLink)) event.url = str(body.OriginalLink)!;
  } else if (type === 'SpamComplaint') event = { ...base, kind: 'spam', at: dateOf(body.BouncedAt) };
  else if (type === 'Bounce') {
    const bounceType = str(body.Type) ?? '';
    const kind: ProviderEventKind =
      bounceType === 'SpamComplaint' ? 'spam' : HARD_BOUNCES.has(bounceType) ? 'bounced' : 'soft_bounce';
    event = {
      ...base,
      providerEvent: `Bounce/${bounceType}`,
      kind,
      at: dateOf(body.BouncedAt),
      diagnostic: str(body.Details) ?? str(body.Description) ?? bounceType,
    };
  }
  return event ? [event] : []; // SubscriptionChange: nothing to record.
};
