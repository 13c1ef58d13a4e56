import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { ConfigError } from './config.ts';
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
        `Missing ${keyFile()}: the database in ${path.join(dataDir, 'pgdata')} was written with the key that file held, and a new key cannot read its adapter configs or webhook secrets. Put the file back (from a backup of DATA_DIR) or set ENCRYPTION_KEY to that key; see README "ENCRYPTION_KEY" if it is lost.`,
      ),
    );
    // The CLI prints a ConfigError's message alone (one line, no stack).
    expect(() => resolveEncryptionKey({ DATA_DIR: dataDir, ENCRYPTION_KEY: undefined })).toThrow(ConfigError);
    expect(existsSync(keyFile())).toBe(false);
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
