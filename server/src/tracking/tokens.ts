import { createHmac, hkdfSync, timingSafeEqual } from 'node:crypto';

/**
 * Signed tracking tokens (issue #11 "Built-in tracking"): what an open pixel or a click link names.
 * A token is `<payload>.<signature>`, both base64url (RFC 4648 §5): the payload is the JSON array
 * `["o", emailId, teamId]` (open) or `["c", emailId, teamId, url]` (click), the signature is
 * HMAC-SHA-256 (RFC 2104) of the payload text under a key derived from ENCRYPTION_KEY with HKDF
 * (RFC 5869, info "tracking token v1", so it is used for nothing else). A click token carries the
 * URL it redirects to: only URLs signed at send (the links of the email) can be redirected to, so
 * the redirect is not an open one. Tokens do not expire (an email can be opened years later).
 */

/** What a verified token proves. */
export type TrackingClaim =
  | { kind: 'open'; emailId: string; teamId: string }
  | { kind: 'click'; emailId: string; teamId: string; url: string };

const keys = new WeakMap<Buffer, Buffer>();

/**
 * The 32-byte HMAC key of tracking tokens, derived from the 32-byte ENCRYPTION_KEY `encryptionKey`
 * with HKDF-SHA-256 (salt "postwright", info "tracking token v1"). Memoised per key buffer.
 */
export function trackingKey(encryptionKey: Buffer): Buffer {
  let key = keys.get(encryptionKey);
  if (!key) {
    key = Buffer.from(hkdfSync('sha256', encryptionKey, 'postwright', 'tracking token v1', 32));
    keys.set(encryptionKey, key);
  }
  return key;
}

function signature(key: Buffer, payload: string): Buffer {
  return createHmac('sha256', key).update(payload).digest();
}

/** The token for `claim` under `key` (see {@link trackingKey}); URL-safe, no padding. */
export function signTrackingToken(key: Buffer, claim: TrackingClaim): string {
  const fields =
    claim.kind === 'open'
      ? ['o', claim.emailId, claim.teamId]
      : ['c', claim.emailId, claim.teamId, claim.url];
  const payload = Buffer.from(JSON.stringify(fields)).toString('base64url');
  return `${payload}.${signature(key, payload).toString('base64url')}`;
}

/**
 * The claim of `token` when its signature is valid under `key` and it is a token of `kind`;
 * undefined for anything else (tampered, truncated, another kind, not a token). Never throws.
 * The signature is compared in constant time, as the exact text {@link signTrackingToken} writes
 * (43 base64url characters): Node's base64url decoder skips characters outside the alphabet and
 * ignores the unused low bits of the last one, so comparing decoded bytes accepted `<token>=`,
 * `<token>!` or a different last character as the same token, any number of spellings of one
 * signed link (review finding, session 22).
 */
export function verifyTrackingToken(
  key: Buffer,
  token: string,
  kind: TrackingClaim['kind'],
): TrackingClaim | undefined {
  const dot = token.indexOf('.');
  if (dot <= 0) return undefined;
  const payload = token.slice(0, dot);
  const given = Buffer.from(token.slice(dot + 1), 'utf8');
  const expected = Buffer.from(signature(key, payload).toString('base64url'), 'utf8');
  if (given.length !== expected.length || !timingSafeEqual(given, expected)) return undefined;
  let fields: unknown;
  try {
    fields = JSON.parse(Buffer.from(payload, 'base64url').toString('utf8'));
  } catch {
    return undefined;
  }
  if (!Array.isArray(fields) || !fields.every((field) => typeof field === 'string')) return undefined;
  const [tag, emailId, teamId, url] = fields as string[];
  if (!emailId || !teamId) return undefined;
  if (kind === 'open' && tag === 'o' && fields.length === 3) return { kind, emailId, teamId };
  if (kind === 'click' && tag === 'c' && fields.length === 4 && url) return { kind, emailId, teamId, url };
  return undefined;
}
