import { createHash, randomInt } from 'node:crypto';

const BASE62 = '0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz';

/** Length of `keyPrefix`: `svc_` plus 8 characters (issue #2 settles the spec's 9-or-12 question on 12). */
export const KEY_PREFIX_LENGTH = 12;

/** A new secret: `svc_` + 32 uniformly random base62 characters (≈190 bits). */
export function generateApiKeySecret(): string {
  let body = '';
  for (let i = 0; i < 32; i++) body += BASE62[randomInt(62)];
  return `svc_${body}`;
}

/** SHA-256 hex of the secret: the only form stored (a key is looked up by its hash). */
export function hashApiKeySecret(secret: string): string {
  return createHash('sha256').update(secret, 'utf8').digest('hex');
}

/** The displayable prefix of a secret (first {@link KEY_PREFIX_LENGTH} characters). */
export function apiKeyPrefix(secret: string): string {
  return secret.slice(0, KEY_PREFIX_LENGTH);
}
