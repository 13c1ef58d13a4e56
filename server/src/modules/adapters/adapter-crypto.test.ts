import { randomBytes } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { ConfigDecryptionError, decryptConfig, encryptConfig } from './adapter-crypto.ts';

const key = randomBytes(32);
const config = { host: 'smtp.example.com', port: 587, username: 'postwright', password: 'pä$$wörd' };

/** Flips one bit of the base64 part `index` (1 = iv, 2 = tag, 3 = ciphertext) of a payload. */
function flipBit(payload: string, index: number): string {
  const parts = payload.split(':');
  const bytes = Buffer.from(parts[index]!, 'base64');
  bytes[0] = bytes[0]! ^ 0x01;
  parts[index] = bytes.toString('base64');
  return parts.join(':');
}

describe('adapter config encryption (AES-256-GCM)', () => {
  it('round-trips a config and keeps it out of the stored text', () => {
    const payload = encryptConfig(key, config);
    expect(payload).toMatch(/^v1:[A-Za-z0-9+/=]+:[A-Za-z0-9+/=]+:[A-Za-z0-9+/=]+$/);
    expect(payload).not.toContain('postwright');
    expect(decryptConfig(key, payload)).toEqual(config);
  });

  it('uses a fresh 12-byte IV for every encryption', () => {
    const first = encryptConfig(key, config);
    const second = encryptConfig(key, config);
    expect(first).not.toBe(second);
    const [, iv1] = first.split(':');
    const [, iv2] = second.split(':');
    expect(Buffer.from(iv1!, 'base64')).toHaveLength(12);
    expect(iv1).not.toBe(iv2);
  });

  it('refuses to decrypt with a wrong key', () => {
    const payload = encryptConfig(key, config);
    expect(() => decryptConfig(randomBytes(32), payload)).toThrow(ConfigDecryptionError);
    expect(() => decryptConfig(randomBytes(32), payload)).toThrow(/failed authentication/);
  });

  it.each([
    ['iv', 1],
    ['auth tag', 2],
    ['ciphertext', 3],
  ])('refuses a payload whose %s was tampered with', (_part, index) => {
    const payload = encryptConfig(key, config);
    const tampered = flipBit(payload, index);
    expect(() => decryptConfig(key, tampered)).toThrow(ConfigDecryptionError);
    // Caught by the GCM tag itself, not by the JSON parse of garbage.
    expect(() => decryptConfig(key, tampered)).toThrow(/failed authentication/);
  });

  it('refuses an unknown version and a malformed payload', () => {
    const payload = encryptConfig(key, config);
    expect(() => decryptConfig(key, payload.replace(/^v1:/, 'v2:'))).toThrow(ConfigDecryptionError);
    expect(() => decryptConfig(key, 'not an encrypted config')).toThrow(ConfigDecryptionError);
    expect(() => decryptConfig(key, payload.split(':').slice(0, 3).join(':'))).toThrow(ConfigDecryptionError);
  });

  it('requires a 32-byte key', () => {
    expect(() => encryptConfig(randomBytes(16), config)).toThrow(RangeError);
    expect(() => decryptConfig(randomBytes(16), encryptConfig(key, config))).toThrow(RangeError);
  });
});
