import { createCipheriv, randomBytes } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { ConfigDecryptionError, decryptConfig, encryptConfig, isLegacyPayload } from './adapter-crypto.ts';

const key = randomBytes(32);
const config = { host: 'smtp.example.com', port: 587, username: 'postwright', password: 'pä$$wörd' };
const row = { teamId: 'team_a', adapterId: 'adapter_1' };

/** Flips one bit of the base64 part `index` (1 = iv, 2 = tag, 3 = ciphertext) of a payload. */
function flipBit(payload: string, index: number): string {
  const parts = payload.split(':');
  const bytes = Buffer.from(parts[index]!, 'base64');
  bytes[0] = bytes[0]! ^ 0x01;
  parts[index] = bytes.toString('base64');
  return parts.join(':');
}

/** A payload as the v1 format (before issue #8) wrote it: AES-256-GCM without associated data. */
function legacyPayload(value: object): string {
  const iv = randomBytes(12);
  const cipher = createCipheriv('aes-256-gcm', key, iv, { authTagLength: 16 });
  const ciphertext = Buffer.concat([cipher.update(JSON.stringify(value), 'utf8'), cipher.final()]);
  return ['v1', iv, cipher.getAuthTag(), ciphertext].map((p) => p.toString('base64')).join(':');
}

describe('adapter config encryption (AES-256-GCM)', () => {
  it('round-trips a config and keeps it out of the stored text', () => {
    const payload = encryptConfig(key, config, row);
    expect(payload).toMatch(/^v2:[A-Za-z0-9+/=]+:[A-Za-z0-9+/=]+:[A-Za-z0-9+/=]+$/);
    expect(payload).not.toContain('postwright');
    expect(decryptConfig(key, payload, row)).toEqual(config);
    expect(isLegacyPayload(payload)).toBe(false);
  });

  it('uses a fresh 12-byte IV for every encryption', () => {
    const first = encryptConfig(key, config, row);
    const second = encryptConfig(key, config, row);
    expect(first).not.toBe(second);
    const [, iv1] = first.split(':');
    const [, iv2] = second.split(':');
    expect(Buffer.from(iv1!, 'base64')).toHaveLength(12);
    expect(iv1).not.toBe(iv2);
  });

  it('refuses to decrypt with a wrong key', () => {
    const payload = encryptConfig(key, config, row);
    expect(() => decryptConfig(randomBytes(32), payload, row)).toThrow(ConfigDecryptionError);
    expect(() => decryptConfig(randomBytes(32), payload, row)).toThrow(/failed authentication/);
  });

  it.each([
    ['iv', 1],
    ['auth tag', 2],
    ['ciphertext', 3],
  ])('refuses a payload whose %s was tampered with', (_part, index) => {
    const payload = encryptConfig(key, config, row);
    const tampered = flipBit(payload, index);
    expect(() => decryptConfig(key, tampered, row)).toThrow(ConfigDecryptionError);
    // Caught by the GCM tag itself, not by the JSON parse of garbage.
    expect(() => decryptConfig(key, tampered, row)).toThrow(/failed authentication/);
  });

  it('refuses an unknown version and a malformed payload', () => {
    const payload = encryptConfig(key, config, row);
    expect(() => decryptConfig(key, payload.replace(/^v2:/, 'v3:'), row)).toThrow(ConfigDecryptionError);
    expect(() => decryptConfig(key, 'not an encrypted config', row)).toThrow(ConfigDecryptionError);
    expect(() => decryptConfig(key, payload.split(':').slice(0, 3).join(':'), row)).toThrow(
      ConfigDecryptionError,
    );
  });

  it('requires a 32-byte key', () => {
    expect(() => encryptConfig(randomBytes(16), config, row)).toThrow(RangeError);
    expect(() => decryptConfig(randomBytes(16), encryptConfig(key, config, row), row)).toThrow(RangeError);
  });
});

describe('adapter config encryption: bound to its row (issue #8)', () => {
  it('refuses a ciphertext copied to another adapter of the same team', () => {
    const payload = encryptConfig(key, config, row);
    expect(() => decryptConfig(key, payload, { ...row, adapterId: 'adapter_2' })).toThrow(
      /copied from another adapter/,
    );
  });

  it('refuses a ciphertext copied to the same adapter id in another team', () => {
    const payload = encryptConfig(key, config, row);
    expect(() => decryptConfig(key, payload, { ...row, teamId: 'team_b' })).toThrow(ConfigDecryptionError);
  });

  it('cannot be fooled by moving characters between team id and adapter id', () => {
    const payload = encryptConfig(key, config, { teamId: 'team_a', adapterId: 'x' });
    expect(() => decryptConfig(key, payload, { teamId: 'team_', adapterId: 'ax' })).toThrow(
      ConfigDecryptionError,
    );
  });

  it('still reads a v1 payload written before associated data, and reports it as legacy', () => {
    const payload = legacyPayload(config);
    expect(isLegacyPayload(payload)).toBe(true);
    expect(decryptConfig(key, payload, row)).toEqual(config);
  });
});
