import { randomBytes } from 'node:crypto';
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import type { Config } from './config.ts';

/**
 * The 32-byte key that encrypts adapter configs (AES-256-GCM). ENCRYPTION_KEY when set; on the
 * embedded default it is generated once and kept in `<DATA_DIR>/encryption.key` (mode 0600), so a
 * restart can still read the configs it wrote (issue #2). config.ts already requires it with
 * DATABASE_URL.
 */
export function resolveEncryptionKey(config: Pick<Config, 'ENCRYPTION_KEY' | 'DATA_DIR'>): Buffer {
  if (config.ENCRYPTION_KEY) return Buffer.from(config.ENCRYPTION_KEY, 'base64');
  const file = path.resolve(config.DATA_DIR, 'encryption.key');
  try {
    const key = Buffer.from(readFileSync(file, 'utf8').trim(), 'base64');
    if (key.length === 32) return key;
    throw new Error(`${file} does not hold a 32-byte base64 key`);
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== 'ENOENT') throw error;
  }
  const key = randomBytes(32);
  mkdirSync(path.dirname(file), { recursive: true });
  writeFileSync(file, `${key.toString('base64')}\n`, { mode: 0o600, flag: 'wx' });
  return key;
}
