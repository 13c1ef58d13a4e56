import { createVerify, X509Certificate } from 'node:crypto';
import { LRUCache } from 'lru-cache';
import { AppError } from '../../http/errors.ts';
import {
  badPayload,
  badSignature,
  configString,
  dateOf,
  jsonBody,
  obj,
  type ProviderEvent,
  type ProviderEventDeps,
  type ProviderEventKind,
  type ProviderEventParser,
  str,
} from './provider-event.ts';

/**
 * Amazon SES events through Amazon SNS: an SNS HTTPS subscription posts one SNS message per request
 * (https://docs.aws.amazon.com/sns/latest/dg/sns-message-and-json-formats.html):
 * `SubscriptionConfirmation` (confirmed by GETting its SubscribeURL), `Notification` (the SES event
 * JSON in `Message`), `UnsubscribeConfirmation` (ignored).
 *
 * Every message is verified (https://docs.aws.amazon.com/sns/latest/dg/sns-verify-signature-of-message.html):
 * the certificate comes only from `SigningCertURL` = https://sns.<region>.amazonaws.com/… (or the
 * operator's PROVIDER_EVENTS_SNS_ENDPOINT origin), the string to sign is the message's fields
 * `Name\nvalue\n` in the documented order, SignatureVersion 1 = SHA1withRSA, 2 = SHA256withRSA.
 * The certificate URL must also name a certificate as SNS does (`/SimpleNotificationService-<hex>.pem`,
 * no query or fragment), and fetched certificates are kept in a small LRU, so a sender cannot make
 * the server fetch (or remember) arbitrary URLs of those hosts.
 * A SubscribeURL is fetched only from the same origins, so a forged message cannot make the server
 * fetch an arbitrary URL. With `webhookTopicArn` configured, other topics are refused.
 * A message whose `Timestamp` is more than {@link SNS_MESSAGE_MAX_AGE_MS} old is refused: SNS
 * retries a delivery for about an hour at most (its default HTTP/S delivery policy), so an older
 * one is a replay (https://docs.aws.amazon.com/sns/latest/dg/sns-message-delivery-retries.html).
 *
 * SES payloads (https://docs.aws.amazon.com/ses/latest/dg/event-publishing-retrieving-sns-contents.html,
 * and the older identity notifications https://docs.aws.amazon.com/ses/latest/dg/notification-contents.html):
 * `eventType` (or `notificationType`) Delivery, Bounce {bounceType Permanent|Transient|Undetermined,
 * bouncedRecipients[{emailAddress, diagnosticCode}]}, Complaint {complainedRecipients}, Open,
 * Click {link}, DeliveryDelay; `mail.messageId` is the id the send answered.
 */

/**
 * An SNS endpoint: `sns.<region>.amazonaws.com` (`.com.cn` in China), the region shaped as AWS
 * names them (`us-east-1`, `us-gov-west-1`, `cn-north-1`). Not any `sns.<label>`: S3's virtual
 * hosts such as `sns.s3.amazonaws.com` belong to whoever owns a bucket named "sns" (review, session 13).
 */
const AWS_SNS_HOST = /^sns\.[a-z]{2}(-[a-z]+)+-\d+\.amazonaws\.com(\.cn)?$/;

/** The signed fields of each SNS message type, in signing order (a Map: the type is the sender's). */
const SIGNED_FIELDS = new Map<string, readonly string[]>([
  ['Notification', ['Message', 'MessageId', 'Subject', 'Timestamp', 'TopicArn', 'Type']],
  [
    'SubscriptionConfirmation',
    ['Message', 'MessageId', 'SubscribeURL', 'Timestamp', 'Token', 'TopicArn', 'Type'],
  ],
  [
    'UnsubscribeConfirmation',
    ['Message', 'MessageId', 'SubscribeURL', 'Timestamp', 'Token', 'TopicArn', 'Type'],
  ],
]);

/** Oldest SNS message accepted (ms): SNS's retries of one delivery end within about an hour. */
export const SNS_MESSAGE_MAX_AGE_MS = 60 * 60_000;

/** The path of an SNS signing certificate, e.g. `/SimpleNotificationService-9c6465fa….pem`. */
const CERTIFICATE_PATH = /^\/SimpleNotificationService-[0-9a-f]+\.pem$/i;

/** Most signing certificates kept (AWS uses one per region at a time, rotated rarely). */
export const CERTIFICATE_CACHE_MAX = 16;

/** A new cache of SNS signing certificates by URL (`deps.certificateCache`): an LRU of 16. */
export function certificateCache(): LRUCache<string, string> {
  return new LRUCache<string, string>({ max: CERTIFICATE_CACHE_MAX });
}

/** True when `url` may be fetched for SNS: https on an SNS host, or under the operator's origin. */
export function isSnsUrl(url: string, snsEndpoint: string | undefined): boolean {
  let parsed: URL;
  try {
    parsed = new URL(url);
  } catch {
    return false;
  }
  if (snsEndpoint) {
    const allowed = new URL(snsEndpoint);
    if (parsed.origin === allowed.origin) return true;
  }
  return (
    parsed.protocol === 'https:' &&
    parsed.port === '' &&
    parsed.username === '' &&
    AWS_SNS_HOST.test(parsed.hostname)
  );
}

/**
 * The URL of an SNS signing certificate, normalised, when `url` is one: an SNS URL
 * ({@link isSnsUrl}) whose path is `/SimpleNotificationService-<hex>.pem`, without query string or
 * fragment; undefined otherwise.
 */
export function snsCertificateUrl(url: string, snsEndpoint: string | undefined): string | undefined {
  if (!isSnsUrl(url, snsEndpoint)) return undefined;
  const parsed = new URL(url);
  if (parsed.search !== '' || parsed.hash !== '' || url.includes('?') || url.includes('#')) return undefined;
  return CERTIFICATE_PATH.test(parsed.pathname) ? parsed.href : undefined;
}

async function certificate(url: string, deps: ProviderEventDeps): Promise<string> {
  const cached = deps.certificateCache.get(url);
  if (cached) return cached;
  const pem = await deps.fetchText(url);
  new X509Certificate(pem); // throws on anything that is not a certificate
  deps.certificateCache.set(url, pem);
  return pem;
}

/**
 * Checks an SNS message's signature with the certificate its SigningCertURL names, and its age.
 * @throws AppError UNAUTHORIZED (401) for an unknown Type, a missing signature, a certificate URL
 *   that is not an SNS certificate's, an unknown SignatureVersion, a Timestamp more than
 *   {@link SNS_MESSAGE_MAX_AGE_MS} old (or not a time), an unfetchable certificate, or a wrong
 *   signature.
 */
async function verify(message: Record<string, unknown>, deps: ProviderEventDeps): Promise<void> {
  const type = str(message.Type) ?? '';
  const fields = SIGNED_FIELDS.get(type);
  const signature = str(message.Signature);
  const signingCertUrl = str(message.SigningCertURL);
  if (!fields || !signingCertUrl || !signature) throw badSignature('Not a signed SNS message');
  const certUrl = snsCertificateUrl(signingCertUrl, deps.snsEndpoint);
  if (!certUrl) throw badSignature('SigningCertURL is not an Amazon SNS certificate URL');
  const version = str(message.SignatureVersion) ?? '1';
  if (version !== '1' && version !== '2') throw badSignature('Unknown SNS SignatureVersion');
  // Before the certificate is fetched: an old message costs no request to AWS.
  const sentAt = typeof message.Timestamp === 'string' ? Date.parse(message.Timestamp) : Number.NaN;
  if (!(Date.now() - sentAt <= SNS_MESSAGE_MAX_AGE_MS)) throw badSignature('SNS message is too old');
  let text = '';
  for (const field of fields) {
    const value = message[field];
    if (typeof value !== 'string') continue; // Subject is optional
    text += `${field}\n${value}\n`;
  }
  let pem: string;
  try {
    pem = await certificate(certUrl, deps);
  } catch {
    throw badSignature('The SNS signing certificate could not be fetched');
  }
  const verifier = createVerify(version === '1' ? 'RSA-SHA1' : 'RSA-SHA256');
  verifier.update(text, 'utf8');
  let valid = false;
  try {
    valid = verifier.verify(pem, signature, 'base64');
  } catch {
    valid = false;
  }
  if (!valid) throw badSignature('Invalid SNS message signature');
}

function sesEvents(raw: Record<string, unknown>): ProviderEvent[] {
  const type = str(raw.eventType) ?? str(raw.notificationType);
  const messageId = str(obj(raw.mail).messageId);
  if (!type || !messageId) return [];
  const base = { messageIds: [messageId], providerEvent: type };
  const addresses = (list: unknown) =>
    (Array.isArray(list) ? list : []).map((r) => str(obj(r).emailAddress)).filter((a): a is string => !!a);
  switch (type) {
    case 'Delivery': {
      const delivery = obj(raw.delivery);
      const recipients = (Array.isArray(delivery.recipients) ? delivery.recipients : []).filter(
        (r): r is string => typeof r === 'string',
      );
      return [{ ...base, kind: 'delivered', at: dateOf(delivery.timestamp), recipients }];
    }
    case 'Open':
      return [{ ...base, kind: 'opened', at: dateOf(obj(raw.open).timestamp), recipients: [] }];
    case 'Click': {
      const click = obj(raw.click);
      const event: ProviderEvent = { ...base, kind: 'clicked', at: dateOf(click.timestamp), recipients: [] };
      if (str(click.link)) event.url = str(click.link)!;
      return [event];
    }
    case 'Complaint': {
      const complaint = obj(raw.complaint);
      return [
        {
          ...base,
          kind: 'spam',
          at: dateOf(complaint.timestamp),
          recipients: addresses(complaint.complainedRecipients),
        },
      ];
    }
    case 'Bounce': {
      const bounce = obj(raw.bounce);
      const bounced = Array.isArray(bounce.bouncedRecipients) ? bounce.bouncedRecipients.map(obj) : [];
      // Permanent = hard (SES itself suppresses the address); Transient and Undetermined = soft.
      const kind: ProviderEventKind = bounce.bounceType === 'Permanent' ? 'bounced' : 'soft_bounce';
      const diagnostic =
        bounced.map((r) => str(r.diagnosticCode)).find((d) => d) ??
        `${str(bounce.bounceType) ?? 'Bounce'}/${str(bounce.bounceSubType) ?? 'General'}`;
      return [
        {
          ...base,
          providerEvent: `Bounce/${str(bounce.bounceType) ?? ''}`,
          kind,
          at: dateOf(bounce.timestamp),
          recipients: addresses(bounced),
          diagnostic,
        },
      ];
    }
    case 'DeliveryDelay': {
      const delay = obj(raw.deliveryDelay);
      return [
        {
          ...base,
          kind: 'deferral',
          at: dateOf(delay.timestamp),
          recipients: addresses(delay.delayedRecipients),
          diagnostic: str(delay.delayType) ?? 'DeliveryDelay',
        },
      ];
    }
    default:
      return []; // Send, Reject, Rendering Failure, Subscription: nothing to record.
  }
}

/**
 * Verifies one SNS message, confirms a subscription, and parses a Notification's SES event.
 * @throws AppError UNAUTHORIZED (401) (see verify; also a message of another topic than
 *   `config.webhookTopicArn`); VALIDATION_ERROR (400) for a SubscribeURL off SNS or a Notification
 *   that is not an SES event; SERVICE_UNAVAILABLE (503) when the SubscribeURL could not be fetched
 *   (a retryable answer).
 */
export const parseSesEvents: ProviderEventParser = async (request, deps) => {
  const message = obj(jsonBody(request));
  await verify(message, deps);
  const topic = configString(request.config, 'webhookTopicArn');
  if (topic && message.TopicArn !== topic) throw badSignature('SNS message from another topic');
  if (message.Type === 'SubscriptionConfirmation') {
    const subscribeUrl = str(message.SubscribeURL);
    if (!subscribeUrl || !isSnsUrl(subscribeUrl, deps.snsEndpoint)) {
      throw badPayload('SubscribeURL is not an Amazon SNS URL');
    }
    try {
      await deps.fetchText(subscribeUrl);
    } catch {
      // The URL carries the subscription's Token: neither the answer nor the log may show it.
      throw new AppError('SERVICE_UNAVAILABLE', 'The SNS subscription could not be confirmed; try again');
    }
    return [];
  }
  if (message.Type !== 'Notification') return [];
  let raw: unknown;
  try {
    raw = JSON.parse(str(message.Message) ?? '');
  } catch {
    throw badPayload('The SNS Message is not an SES event');
  }
  return sesEvents(obj(raw));
};
