import { createHmac, timingSafeEqual } from 'node:crypto';

/**
 * The provider-events URL of an adapter (issue #11 "Provider events in"):
 * `<BASE_URL>/api/provider-events/<adapterId>/<token>`.
 *
 * The token is not stored: it is `base64url(HMAC-SHA256(K, adapterId))` with
 * `K = HMAC-SHA256(ENCRYPTION_KEY, "postwright/provider-events-token/v1")` (a key derived from the
 * server secret for this one purpose, so the token reveals nothing about ENCRYPTION_KEY and no
 * other use of the key can produce it). 256 bits: unguessable, and recomputed on each request,
 * so nothing secret sits in the database. Consequence: a token changes only when ENCRYPTION_KEY
 * changes (or the adapter is re-created); to revoke one URL, re-create the adapter.
 */

const DERIVATION_LABEL = 'postwright/provider-events-token/v1';

function eventsKey(encryptionKey: Buffer): Buffer {
  return createHmac('sha256', encryptionKey).update(DERIVATION_LABEL).digest();
}

/** The events token of `adapterId` (43 base64url characters). */
export function adapterEventsToken(encryptionKey: Buffer, adapterId: string): string {
  return createHmac('sha256', eventsKey(encryptionKey)).update(adapterId, 'utf8').digest('base64url');
}

/** True when `token` is `adapterId`'s events token (constant-time comparison). */
export function isAdapterEventsToken(encryptionKey: Buffer, adapterId: string, token: string): boolean {
  const expected = Buffer.from(adapterEventsToken(encryptionKey, adapterId), 'utf8');
  const given = Buffer.from(token, 'utf8');
  return given.length === expected.length && timingSafeEqual(given, expected);
}

/** The full events URL of `adapterId`; `baseUrl` is BASE_URL without a trailing slash. */
export function adapterEventsUrl(baseUrl: string, encryptionKey: Buffer, adapterId: string): string {
  return `${baseUrl}/api/provider-events/${encodeURIComponent(adapterId)}/${adapterEventsToken(encryptionKey, adapterId)}`;
}
