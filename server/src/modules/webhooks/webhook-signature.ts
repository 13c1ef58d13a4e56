import { createHmac, type KeyObject, randomBytes } from 'node:crypto';

/**
 * Webhook secrets and signatures per the Standard Webhooks specification
 * (github.com/standard-webhooks/standard-webhooks, spec/standard-webhooks.md "Signature scheme"):
 * a secret is `whsec_` + base64 of 24 to 64 random bytes; a signature is
 * `v1,` + base64(HMAC-SHA256(key = the base64-decoded part after `whsec_`,
 * message = `${webhook-id}.${webhook-timestamp}.${body}`)); several signatures are separated by
 * spaces in the `webhook-signature` header (used while a rotated secret is still valid).
 * Signed with node:crypto (the `standardwebhooks` package verifies them in the tests).
 */

const SECRET_PREFIX = 'whsec_';
/** 32 random bytes: 256-bit HMAC keys (the spec asks for 24 to 64). */
const SECRET_BYTES = 32;

/** A new signing secret: `whsec_` + base64 of 32 random bytes. */
export function generateWebhookSecret(): string {
  return SECRET_PREFIX + randomBytes(SECRET_BYTES).toString('base64');
}

/**
 * The HMAC key of a secret (the bytes after `whsec_`, base64-decoded).
 * @throws Error when `secret` is not a `whsec_` secret.
 */
export function signingKey(secret: string): Buffer {
  if (!secret.startsWith(SECRET_PREFIX)) throw new Error('Not a whsec_ webhook secret');
  return Buffer.from(secret.slice(SECRET_PREFIX.length), 'base64');
}

/**
 * The `webhook-signature` header value: one `v1,<base64>` per key, space-separated.
 * @param keys HMAC keys ({@link signingKey}), the current one first; a KeyObject of one
 *   (`createSecretKey`) signs several times faster than its Buffer (about 3 µs instead of 15 µs
 *   a body here: node:crypto makes a key object from a Buffer on every call).
 * @param messageId the `webhook-id`; @param timestamp the `webhook-timestamp` (Unix seconds);
 * @param body the exact request body.
 */
export function signatureHeader(
  keys: readonly (Buffer | KeyObject)[],
  messageId: string,
  timestamp: number,
  body: string,
): string {
  const content = `${messageId}.${timestamp}.${body}`;
  return keys.map((key) => `v1,${createHmac('sha256', key).update(content).digest('base64')}`).join(' ');
}
