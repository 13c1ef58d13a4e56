import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { ConfigError, loadConfig } from './config.ts';
import { resolveEncryptionKey } from './encryption-key.ts';

/** Review finding, integrity 3: a lost encryption.key was replaced by a new one silently. */
describe('resolveEncryptionKey on the embedded default, with a database already in DATA_DIR', () => {
  let dataDir: string;
  beforeEach(() => {
    dataDir = mkdtempSync(path.join(tmpdir(), 'postwright-key-'));
  });
  afterEach(() => rmSync(dataDir, { recursive: true, force: true }));

  const keyFile = () => path.join(dataDir, 'encryption.key');
  const makeCluster = () => {
    mkdirSync(path.join(dataDir, 'pgdata'));
    writeFileSync(path.join(dataDir, 'pgdata', 'PG_VERSION'), '17\n');
  };

  it('refuses to generate a new key when encryption.key is missing', () => {
    makeCluster();
    expect(() => resolveEncryptionKey({ DATA_DIR: dataDir, ENCRYPTION_KEY: undefined })).toThrow(
      new ConfigError(
        `Missing ${keyFile()}: the database in ${path.join(dataDir, 'pgdata')} was written with the key that file held, and a new key cannot read its adapter configs or webhook secrets. Put the file back (from a backup of DATA_DIR) or set ENCRYPTION_KEY to that key. If that key is lost, ENCRYPTION_KEY_CHECK=warn starts anyway as a last resort (what was encrypted with it must then be entered again); see README "ENCRYPTION_KEY".`,
      ),
    );
    // The CLI prints a ConfigError's message alone (one line, no stack).
    expect(() => resolveEncryptionKey({ DATA_DIR: dataDir, ENCRYPTION_KEY: undefined })).toThrow(ConfigError);
    expect(existsSync(keyFile())).toBe(false);
  });

  it('with ENCRYPTION_KEY_CHECK=warn, generates a new key into the file and warns with what stops working', () => {
    makeCluster();
    const warnings: string[] = [];
    const key = resolveEncryptionKey(
      { DATA_DIR: dataDir, ENCRYPTION_KEY: undefined, ENCRYPTION_KEY_CHECK: 'warn' },
      (line) => warnings.push(line),
    );
    expect(Buffer.from(readFileSync(keyFile(), 'utf8').trim(), 'base64').equals(key)).toBe(true);
    expect(warnings).toHaveLength(1);
    expect(warnings[0]).toContain(
      `WARNING: ${keyFile()} was missing next to the database in ${path.join(dataDir, 'pgdata')}; ENCRYPTION_KEY_CHECK=warn generated a new key into it.`,
    );
    for (const lost of [
      'adapter configs',
      'webhook secrets',
      'sessions',
      'provider-event URLs',
      'tracking links',
    ]) {
      expect(warnings[0]).toContain(lost);
    }
    expect(warnings[0]).toMatch(/configuration is entered again.*secret is rotated/);
    // The next start reads the new key, without a warning.
    const again: string[] = [];
    expect(
      resolveEncryptionKey({ DATA_DIR: dataDir, ENCRYPTION_KEY: undefined }, (line) =>
        again.push(line),
      ).equals(key),
    ).toBe(true);
    expect(again).toEqual([]);
  });

  it('generates the key of a new DATA_DIR without a warning, under ENCRYPTION_KEY_CHECK=warn too', () => {
    const warnings: string[] = [];
    resolveEncryptionKey(
      { DATA_DIR: dataDir, ENCRYPTION_KEY: undefined, ENCRYPTION_KEY_CHECK: 'warn' },
      (line) => warnings.push(line),
    );
    expect(existsSync(keyFile())).toBe(true);
    expect(warnings).toEqual([]);
  });

  it('reads the kept encryption.key', () => {
    makeCluster();
    const key = Buffer.alloc(32, 3);
    writeFileSync(keyFile(), `${key.toString('base64')}\n`);
    expect(resolveEncryptionKey({ DATA_DIR: dataDir, ENCRYPTION_KEY: undefined }).equals(key)).toBe(true);
  });

  it('uses ENCRYPTION_KEY when set, file or not', () => {
    makeCluster();
    const key = Buffer.alloc(32, 5);
    expect(
      resolveEncryptionKey({ DATA_DIR: dataDir, ENCRYPTION_KEY: key.toString('base64') }).equals(key),
    ).toBe(true);
  });

  it('still generates the key next to an empty pgdata (a first start that failed before initdb)', () => {
    mkdirSync(path.join(dataDir, 'pgdata'));
    const key = resolveEncryptionKey({ DATA_DIR: dataDir, ENCRYPTION_KEY: undefined });
    expect(Buffer.from(readFileSync(keyFile(), 'utf8').trim(), 'base64').equals(key)).toBe(true);
  });
});

describe('ENCRYPTION_KEY_CHECK', () => {
  it('is refuse unless set to warn; another value is a one-line config error', () => {
    expect(loadConfig({}).ENCRYPTION_KEY_CHECK).toBe('refuse');
    expect(loadConfig({ ENCRYPTION_KEY_CHECK: 'warn' }).ENCRYPTION_KEY_CHECK).toBe('warn');
    expect(() => loadConfig({ ENCRYPTION_KEY_CHECK: 'off' })).toThrow(
      new ConfigError('Invalid ENCRYPTION_KEY_CHECK: must be refuse or warn'),
    );
  });
});
