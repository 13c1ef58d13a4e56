import { decryptConfig, encryptConfig } from '../adapters/index.ts';

/**
 * Webhook secrets at rest: AES-256-GCM with the adapter configs' format and key (ENCRYPTION_KEY),
 * bound to the webhook's team and id as associated data, so a ciphertext copied to another row
 * does not decrypt there (webhook ids are `whk_…`, adapter ids `adp_…`: the two never collide).
 */

/** Encrypts `secret` for the webhook `webhookId` of `teamId`. */
export function encryptWebhookSecret(key: Buffer, secret: string, teamId: string, webhookId: string): string {
  return encryptConfig(key, { secret }, { teamId, adapterId: webhookId });
}

/**
 * Decrypts a secret written by {@link encryptWebhookSecret} for the same row.
 * @throws ConfigDecryptionError on a wrong key, tampered text or another row's ciphertext.
 */
export function decryptWebhookSecret(
  key: Buffer,
  payload: string,
  teamId: string,
  webhookId: string,
): string {
  const value = decryptConfig(key, payload, { teamId, adapterId: webhookId }) as { secret?: unknown };
  if (typeof value?.secret !== 'string') throw new Error('Stored webhook secret is malformed');
  return value.secret;
}
