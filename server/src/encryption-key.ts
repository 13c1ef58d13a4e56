import { randomBytes } from 'node:crypto';
import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { desc, eq } from 'drizzle-orm';
import { type Config, ConfigError } from './config.ts';
import type { Executor } from './db/client.ts';
import { embeddedLayout } from './db/embedded-postgres-cluster.ts';
import { adapters, webhooks } from './db/schema/index.ts';
import { decryptConfig } from './modules/adapters/index.ts';
import { decryptWebhookSecret } from './modules/webhooks/webhook-secret-store.ts';

/**
 * The 32-byte key that encrypts adapter configs and webhook secrets (AES-256-GCM). ENCRYPTION_KEY
 * when set; on the embedded default it is generated once and kept in `<DATA_DIR>/encryption.key`
 * (mode 0600), so a restart can still read the configs it wrote (issue #2). config.ts already
 * requires it with DATABASE_URL.
 * @throws ConfigError (one line, printed as is by the CLI) when `encryption.key` is missing while
 *   `<DATA_DIR>/pgdata` already holds a database: that database was written with the key the file
 *   held, and a new one read none of its adapter configs or webhook secrets (review finding,
 *   integrity 3: one was generated silently). Error when the file does not hold a 32-byte key.
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
  const { pgdata } = embeddedLayout(config.DATA_DIR);
  // PG_VERSION is what initdb writes first that names a cluster (an empty pgdata is a failed start).
  if (existsSync(path.join(pgdata, 'PG_VERSION'))) {
    throw new ConfigError(
      `Missing ${file}: the database in ${pgdata} was written with the key that file held, and a new key cannot read its adapter configs or webhook secrets. Put the file back (from a backup of DATA_DIR) or set ENCRYPTION_KEY to that key; see README "ENCRYPTION_KEY" if it is lost.`,
    );
  }
  const key = randomBytes(32);
  mkdirSync(path.dirname(file), { recursive: true });
  writeFileSync(file, `${key.toString('base64')}\n`, { mode: 0o600, flag: 'wx' });
  return key;
}

/** Active adapters and active webhooks sampled each (the most recently updated first). */
const KEY_CHECK_SAMPLE = 5;

/** What {@link checkEncryptionKeyReadsDatabase} found: rows sampled, and how many of them did not decrypt. */
export interface KeyCheckResult {
  sampled: number;
  unreadable: number;
}

/**
 * Checks at start-up that `key` reads what the database holds (review finding, integrity 3: a
 * wrong or lost key went unnoticed until sends, webhook deliveries and the adapter view failed).
 * Decrypts the configs of up to {@link KEY_CHECK_SAMPLE} active adapters and the secrets of up to
 * as many active webhooks, the most recently updated first (a re-entered config or a rotated
 * secret counts as read), in two small queries. Inactive rows are left out: they do not send or
 * sign, and deactivating them is how an operator whose key is lost gets a server started to
 * re-enter them (README "ENCRYPTION_KEY").
 * - none sampled (a new database) or all read: nothing said;
 * - some read, some not: `warn` is called with one line giving the count;
 * @throws ConfigError (one line, naming ENCRYPTION_KEY or `<DATA_DIR>/encryption.key`) when rows
 *   were sampled and none decrypts: the key is not the one the database was written with.
 */
export async function checkEncryptionKeyReadsDatabase(
  db: Executor,
  key: Buffer,
  config: Pick<Config, 'ENCRYPTION_KEY' | 'DATA_DIR'>,
  warn: (line: string) => void = console.warn,
): Promise<KeyCheckResult> {
  const adapterRows = await db
    .select({ id: adapters.id, teamId: adapters.teamId, ciphertext: adapters.configEncrypted })
    .from(adapters)
    .where(eq(adapters.isActive, true))
    .orderBy(desc(adapters.updatedAt))
    .limit(KEY_CHECK_SAMPLE);
  const webhookRows = await db
    .select({ id: webhooks.id, teamId: webhooks.teamId, ciphertext: webhooks.secretEncrypted })
    .from(webhooks)
    .where(eq(webhooks.isActive, true))
    .orderBy(desc(webhooks.updatedAt))
    .limit(KEY_CHECK_SAMPLE);
  const unreadable =
    adapterRows.filter((row) =>
      failsToDecrypt(() => decryptConfig(key, row.ciphertext, { teamId: row.teamId, adapterId: row.id })),
    ).length +
    webhookRows.filter((row) =>
      failsToDecrypt(() => decryptWebhookSecret(key, row.ciphertext, row.teamId, row.id)),
    ).length;
  const sampled = adapterRows.length + webhookRows.length;
  const source = config.ENCRYPTION_KEY ? 'ENCRYPTION_KEY' : path.resolve(config.DATA_DIR, 'encryption.key');
  if (sampled > 0 && unreadable === sampled) {
    throw new ConfigError(
      `Invalid ${source}: it decrypts none of the ${sampled} adapter configs and webhook secrets checked, so it is not the key this database was written with. Start with that key; see README "ENCRYPTION_KEY" if it is lost.`,
    );
  }
  if (unreadable > 0) {
    warn(
      `${source} does not decrypt ${unreadable} of the ${sampled} adapter configs and webhook secrets checked at start-up: re-enter those adapters' configurations and rotate those webhooks' secrets.`,
    );
  }
  return { sampled, unreadable };
}

function failsToDecrypt(decrypt: () => unknown): boolean {
  try {
    decrypt();
    return false;
  } catch {
    return true;
  }
}
