import { createCipheriv, createDecipheriv, randomBytes } from 'node:crypto';

/**
 * Adapter configs at rest (spec, "Adapter": "Configurations are stored encrypted").
 * AES-256-GCM (NIST SP 800-38D) with a random 96-bit IV per encryption and a 128-bit tag;
 * the stored string is `<version>:<base64 iv>:<base64 tag>:<base64 ciphertext>` of the JSON config.
 * - `v2` (written now): the row's team id and adapter id are the GCM associated data, so a
 *   ciphertext copied into another adapter row, of the same team or another, fails authentication
 *   instead of lending its credentials to that row (issue #8).
 * - `v1` (written before issue #8): no associated data; still read, so existing rows keep working,
 *   and {@link isLegacyPayload} finds them for re-encryption as v2.
 */

const VERSION = 'v2';
const LEGACY_VERSION = 'v1';
const ALGORITHM = 'aes-256-gcm';
const KEY_BYTES = 32;
/** 12 bytes: the IV length GCM is defined for without an extra GHASH (SP 800-38D, 8.2). */
const IV_BYTES = 12;
const TAG_BYTES = 16;

/** Thrown when a stored config cannot be decrypted: wrong key, tampered or malformed text. */
export class ConfigDecryptionError extends Error {
  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = 'ConfigDecryptionError';
  }
}

/** The row a ciphertext belongs to: bound into it as associated data (v2). */
export interface ConfigBinding {
  teamId: string;
  adapterId: string;
}

/** The associated data of a v2 payload: a JSON array, so no id can be crafted to collide with another pair. */
function associatedData(binding: ConfigBinding): Buffer {
  return Buffer.from(
    JSON.stringify(['postwright/adapter-config', binding.teamId, binding.adapterId]),
    'utf8',
  );
}

/** True for a payload in the v1 format (no associated data), which should be re-encrypted. */
export function isLegacyPayload(payload: string): boolean {
  return payload.startsWith(`${LEGACY_VERSION}:`);
}

function assertKey(key: Buffer): void {
  if (key.length !== KEY_BYTES) {
    throw new RangeError(`Encryption key must be ${KEY_BYTES} bytes, got ${key.length}`);
  }
}

/**
 * Encrypts an adapter config for storage in `adapters.config_encrypted`.
 * @param key 32-byte key (`ENCRYPTION_KEY`, base64-decoded).
 * @param config any JSON-serializable object.
 * @param binding the row the text is stored in; decrypting needs the same team and adapter id.
 * @returns `v2:<iv>:<tag>:<ciphertext>`, each part base64; a fresh random IV each call, so the
 *   same config never encrypts to the same string twice.
 * @throws RangeError when the key is not 32 bytes.
 */
export function encryptConfig(key: Buffer, config: object, binding: ConfigBinding): string {
  assertKey(key);
  const iv = randomBytes(IV_BYTES);
  const cipher = createCipheriv(ALGORITHM, key, iv, { authTagLength: TAG_BYTES });
  cipher.setAAD(associatedData(binding));
  const ciphertext = Buffer.concat([cipher.update(JSON.stringify(config), 'utf8'), cipher.final()]);
  const tag = cipher.getAuthTag();
  return [VERSION, iv.toString('base64'), tag.toString('base64'), ciphertext.toString('base64')].join(':');
}

/**
 * Decrypts a string written by {@link encryptConfig} (v2, checked against `binding`) or by the
 * earlier v1 format (no associated data); the GCM tag is verified before any plaintext is returned.
 * @param binding the row the text was read from.
 * @returns the parsed JSON config (validate it with `parseAdapterConfig` before use).
 * @throws ConfigDecryptionError for an unknown version, a malformed payload, a wrong key,
 *   tampered text, or a v2 text stored in another row than it was written for.
 *   RangeError when the key is not 32 bytes.
 */
export function decryptConfig(key: Buffer, payload: string, binding: ConfigBinding): unknown {
  assertKey(key);
  const parts = payload.split(':');
  const version = parts[0];
  if (parts.length !== 4 || (version !== VERSION && version !== LEGACY_VERSION)) {
    throw new ConfigDecryptionError('Unsupported encrypted config format');
  }
  const [, ivText, tagText, ciphertextText] = parts as [string, string, string, string];
  const iv = Buffer.from(ivText, 'base64');
  const tag = Buffer.from(tagText, 'base64');
  if (iv.length !== IV_BYTES || tag.length !== TAG_BYTES) {
    throw new ConfigDecryptionError('Malformed encrypted config');
  }
  let plaintext: string;
  try {
    const decipher = createDecipheriv(ALGORITHM, key, iv, { authTagLength: TAG_BYTES });
    if (version === VERSION) decipher.setAAD(associatedData(binding));
    decipher.setAuthTag(tag);
    plaintext = Buffer.concat([
      decipher.update(Buffer.from(ciphertextText, 'base64')),
      decipher.final(),
    ]).toString('utf8');
  } catch (cause) {
    throw new ConfigDecryptionError(
      'Encrypted config failed authentication (wrong key, tampered data or copied from another adapter)',
      {
        cause,
      },
    );
  }
  try {
    return JSON.parse(plaintext);
  } catch (cause) {
    throw new ConfigDecryptionError('Decrypted config is not JSON', { cause });
  }
}
