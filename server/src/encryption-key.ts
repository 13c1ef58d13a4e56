import { randomBytes } from 'node:crypto';
import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { desc, eq } from 'drizzle-orm';
import { type Config, ConfigError } from './config.ts';
import type { Executor } from './db/client.ts';
import { embeddedLayout } from './db/embedded-postgres-cluster.ts';
import { adapters, webhooks } from './db/schema/index.ts';
import { decryptConfig } from './modules/adapters/index.ts';
import { decryptWebhookSecret } from './modules/webhooks/index.ts';

/** The settings the start-up key checks read; ENCRYPTION_KEY_CHECK unset means `refuse`. */
export type KeyCheckConfig = Pick<Config, 'ENCRYPTION_KEY' | 'DATA_DIR'> &
  Partial<Pick<Config, 'ENCRYPTION_KEY_CHECK'>>;

/** The last resort the refusals name, for an operator whose key is lost (README "ENCRYPTION_KEY"). */
const LAST_RESORT =
  'If that key is lost, ENCRYPTION_KEY_CHECK=warn starts anyway as a last resort (what was encrypted with it must then be entered again); see README "ENCRYPTION_KEY".';

/** What stops working when the key changed, and what to do: the end of the `warn` mode's warnings. */
const WHAT_STOPS_WORKING =
  'What was written with the old key stops working: adapter configs (their sends fail until each adapter\'s configuration is entered again), webhook secrets (deliveries fail until each webhook\'s secret is rotated), sessions (everyone signs in again), provider-event URLs (paste them into the providers again) and the tracking links of emails already sent; see README "ENCRYPTION_KEY".';

/**
 * The 32-byte key that encrypts adapter configs and webhook secrets (AES-256-GCM). ENCRYPTION_KEY
 * when set; on the embedded default it is generated once and kept in `<DATA_DIR>/encryption.key`
 * (mode 0600), so a restart can still read the configs it wrote (issue #2). config.ts already
 * requires it with DATABASE_URL.
 * When `encryption.key` is missing while `<DATA_DIR>/pgdata` already holds a database, that
 * database was written with the key the file held, and a new one reads none of its adapter configs
 * or webhook secrets (review finding, integrity 3: one was generated silently). With
 * ENCRYPTION_KEY_CHECK=warn a new key is generated anyway and `warn` is called with one line
 * saying what stops working: the only way to start again when the key is truly lost, since the
 * embedded database runs only inside Postwright.
 * @throws ConfigError (one line, printed as is by the CLI) for that missing file when
 *   ENCRYPTION_KEY_CHECK is `refuse` (the default). Error when the file does not hold a 32-byte key.
 */
export function resolveEncryptionKey(
  config: KeyCheckConfig,
  warn: (line: string) => void = console.warn,
): Buffer {
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
  const hasDatabase = existsSync(path.join(pgdata, 'PG_VERSION'));
  if (hasDatabase && config.ENCRYPTION_KEY_CHECK !== 'warn') {
    throw new ConfigError(
      `Missing ${file}: the database in ${pgdata} was written with the key that file held, and a new key cannot read its adapter configs or webhook secrets. Put the file back (from a backup of DATA_DIR) or set ENCRYPTION_KEY to that key. ${LAST_RESORT}`,
    );
  }
  const key = randomBytes(32);
  mkdirSync(path.dirname(file), { recursive: true });
  writeFileSync(file, `${key.toString('base64')}\n`, { mode: 0o600, flag: 'wx' });
  if (hasDatabase) {
    warn(
      `WARNING: ${file} was missing next to the database in ${pgdata}; ENCRYPTION_KEY_CHECK=warn generated a new key into it. ${WHAT_STOPS_WORKING}`,
    );
  }
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
 * sign, and deactivating them is one way an operator whose key is lost gets a server started to
 * re-enter them, ENCRYPTION_KEY_CHECK=warn the other (README "ENCRYPTION_KEY").
 * - none sampled (a new database) or all read: nothing said;
 * - some read, some not: `warn` is called with one line giving the count;
 * - none read, with ENCRYPTION_KEY_CHECK=warn: `warn` is called with one line giving the count and
 *   what stops working, and the process starts (the way out for an operator whose key is lost).
 * @throws ConfigError (one line, naming ENCRYPTION_KEY or `<DATA_DIR>/encryption.key`) when rows
 *   were sampled, none decrypts and ENCRYPTION_KEY_CHECK is `refuse` (the default): the key is not
 *   the one the database was written with.
 */
export async function checkEncryptionKeyReadsDatabase(
  db: Executor,
  key: Buffer,
  config: KeyCheckConfig,
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
    if (config.ENCRYPTION_KEY_CHECK !== 'warn') {
      throw new ConfigError(
        `Invalid ${source}: it decrypts none of the ${sampled} adapter configs and webhook secrets checked, so it is not the key this database was written with. Start with that key. ${LAST_RESORT}`,
      );
    }
    warn(
      `WARNING: ${source} decrypts none of the ${sampled} adapter configs and webhook secrets checked at start-up, so it is not the key this database was written with; starting anyway (ENCRYPTION_KEY_CHECK=warn). ${WHAT_STOPS_WORKING}`,
    );
  } else if (unreadable > 0) {
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
