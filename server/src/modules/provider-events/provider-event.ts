import type { LRUCache } from 'lru-cache';
import { AppError } from '../../http/errors.ts';

/**
 * The common shape every provider's events are parsed into (issue #11 "Provider events in"), and
 * the contract of a parser file (one per provider in this folder).
 */

/**
 * What happened, in the service's vocabulary:
 * - `delivered`, `opened`, `clicked`: the statuses of the same name;
 * - `bounced`: a hard (permanent) bounce: status `bounced`, the address is suppressed;
 * - `soft_bounce`, `deferral`: a temporary failure: kept in the history only (the provider retries);
 * - `spam`: a complaint: status `spam`, the address is suppressed;
 * - `failed`: the provider gave up without trying (SendGrid `dropped`): status `failed`.
 */
export type ProviderEventKind =
  | 'delivered'
  | 'opened'
  | 'clicked'
  | 'bounced'
  | 'soft_bounce'
  | 'deferral'
  | 'spam'
  | 'failed';

/** One event about one message, as a parser reads it from the provider's payload. */
export interface ProviderEvent {
  /**
   * The ids the message may be stored under as `providerMessageId` (what the provider's send
   * answered), most specific first; e.g. Mailgun's `<id>` with and without angle brackets.
   */
  messageIds: string[];
  kind: ProviderEventKind;
  /** When it happened, by the provider's clock (now when the payload does not say). */
  at: Date;
  /** The addresses the event is about (the bounced or complaining ones); may be empty. */
  recipients: string[];
  /** The provider's diagnostic (bounce reason, SMTP reply), for `errorMessage` and the history. */
  diagnostic?: string;
  /** The provider's own name of the event, e.g. `email.bounced`, `spamreport`. */
  providerEvent: string;
  /** The clicked URL of a click. */
  url?: string;
}

/** A request to the provider-events URL, authenticated by its token already. */
export interface ProviderEventRequest {
  /** The adapter the URL names (replay memories are kept per adapter). */
  adapterId: string;
  /** Lower-case header names (Node's). */
  headers: Record<string, string | string[] | undefined>;
  /** The raw body, exactly as received (signatures cover these bytes). */
  body: Buffer;
  /** The adapter's decrypted config: the optional signing secrets live there. */
  config: Record<string, unknown>;
}

/** What a parser may reach outside the request: only SNS needs it (certificates, subscriptions). */
export interface ProviderEventDeps {
  /** GETs an https URL the parser has already checked, returns the body text; throws on non-2xx. */
  fetchText(url: string): Promise<string>;
  /** Operator-only origin allowed in place of https://sns.<region>.amazonaws.com (tests). */
  snsEndpoint?: string | undefined;
  /**
   * Certificates already fetched, by URL (one per app; AWS rotates them rarely). Bounded: only
   * URLs of the SNS certificate shape reach it, but their names are the sender's to choose.
   */
  certificateCache: LRUCache<string, string>;
  /**
   * Claims a signature token for an adapter, kept `keepMs` (ms), across processes (the database,
   * see claimProviderEventToken): true when new, false for a replay (mailgun.events.ts).
   */
  claimToken(adapterId: string, token: string, keepMs: number): Promise<boolean>;
}

/**
 * A provider's events parser: verifies the request's signature (when the adapter has a signing
 * secret configured) and returns the events it carries, in the order of the payload.
 * @throws AppError UNAUTHORIZED (401) for a missing or wrong signature; VALIDATION_ERROR (400) for a
 *   body that is not the provider's format.
 */
export type ProviderEventParser = (
  request: ProviderEventRequest,
  deps: ProviderEventDeps,
) => Promise<ProviderEvent[]>;

/** 401 UNAUTHORIZED for a signature that does not verify. */
export function badSignature(message = 'Invalid provider event signature'): AppError {
  return new AppError('UNAUTHORIZED', message);
}

/** 400 VALIDATION_ERROR for a body that is not the provider's event format. */
export function badPayload(message: string): AppError {
  return new AppError('VALIDATION_ERROR', message);
}

/** The first value of header `name` (lower case), or undefined. */
export function header(request: ProviderEventRequest, name: string): string | undefined {
  const value = request.headers[name];
  return Array.isArray(value) ? value[0] : value;
}

/** The body parsed as JSON. @throws VALIDATION_ERROR when it is not JSON. */
export function jsonBody(request: ProviderEventRequest): unknown {
  try {
    return JSON.parse(request.body.toString('utf8'));
  } catch {
    throw badPayload('The event body is not JSON');
  }
}

/** A config field as a non-empty string, or undefined. */
export function configString(config: Record<string, unknown>, name: string): string | undefined {
  const value = config[name];
  return typeof value === 'string' && value.length > 0 ? value : undefined;
}

/**
 * The range of times an event may carry (ms since the epoch): 1970-01-01 to 9999-12-31 (UTC).
 * Anything else is not a provider's clock; JavaScript accepts dates PostgreSQL's timestamptz does
 * not (before 4713 BC), and ISO strings past year 9999 take a sign PostgreSQL does not read.
 */
const EARLIEST_EVENT_MS = 0;
const LATEST_EVENT_MS = Date.UTC(9999, 11, 31, 23, 59, 59, 999);

/**
 * A Date of `value` (ISO string, or seconds since the epoch as number/string), or `fallback` when
 * it is absent, not a date, or outside 1970-01-01…9999-12-31 UTC (a payload's `1e20` is not a time).
 */
export function dateOf(value: unknown, fallback = new Date()): Date {
  let date: Date | undefined;
  if (typeof value === 'number' && Number.isFinite(value)) date = new Date(value * 1000);
  else if (typeof value === 'string' && value.length > 0) {
    date = /^\d+(\.\d+)?$/.test(value) ? new Date(Number(value) * 1000) : new Date(value);
  }
  const ms = date?.getTime() ?? Number.NaN;
  return ms >= EARLIEST_EVENT_MS && ms <= LATEST_EVENT_MS ? date! : fallback;
}

/**
 * True when `seconds` (a decimal count of seconds since the epoch, as a signature header or field
 * carries it) is at most `windowMs` away from `now` (ms), in either direction; false for anything
 * that is not such a number.
 */
export function isFreshTimestamp(seconds: string, windowMs: number, now = Date.now()): boolean {
  if (!/^\d{1,12}(\.\d+)?$/.test(seconds)) return false;
  return Math.abs(now - Number(seconds) * 1000) <= windowMs;
}

/** `value` when it is a non-empty string, else undefined. */
export function str(value: unknown): string | undefined {
  return typeof value === 'string' && value.length > 0 ? value : undefined;
}

/** `value` as a plain object (or an empty one). */
export function obj(value: unknown): Record<string, unknown> {
  return value !== null && typeof value === 'object' && !Array.isArray(value)
    ? (value as Record<string, unknown>)
    : {};
}
