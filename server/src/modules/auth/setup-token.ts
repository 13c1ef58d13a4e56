import { createHash, randomBytes, timingSafeEqual } from 'node:crypto';
import type { Config } from '../../config.ts';
import type { Executor } from '../../db/client.ts';
import { anyUserExists } from './auth.repository.ts';

/** Generated once per process when SETUP_TOKEN is not configured. */
let generatedToken: string | undefined;

/**
 * The token that authorises the first-run setup (issue #2): SETUP_TOKEN when configured,
 * otherwise a random 32-byte base64url token generated once per process (a restart prints a new one).
 */
export function resolveSetupToken(config: Pick<Config, 'SETUP_TOKEN'>): string {
  if (config.SETUP_TOKEN) return config.SETUP_TOKEN;
  generatedToken ??= randomBytes(32).toString('base64url');
  return generatedToken;
}

/** The dashboard's setup page with the token: `${BASE_URL}/setup?token=…`. */
export function setupUrl(config: Pick<Config, 'SETUP_TOKEN' | 'BASE_URL'>): string {
  return `${config.BASE_URL}/setup?token=${encodeURIComponent(resolveSetupToken(config))}`;
}

/** True when `candidate` equals the setup token (constant-time comparison of SHA-256 digests). */
export function isSetupTokenValid(config: Pick<Config, 'SETUP_TOKEN'>, candidate: string): boolean {
  const digest = (value: string) => createHash('sha256').update(value, 'utf8').digest();
  return timingSafeEqual(digest(resolveSetupToken(config)), digest(candidate));
}

/** True while no user exists: the instance still needs its first-run setup. */
export async function isSetupRequired(db: Executor): Promise<boolean> {
  return !(await anyUserExists(db));
}

/**
 * Prints the setup URL through `log.info` when no user exists yet (called by `postwright start`),
 * so the operator can create the first owner. Prints nothing once setup is done.
 */
export async function printSetupUrlIfNeeded(
  ctx: { config: Config; database: { db: Executor } },
  log: { info: (message: string) => void },
): Promise<void> {
  if (!(await isSetupRequired(ctx.database.db))) return;
  log.info(`No account exists yet. Open this URL to create the first owner: ${setupUrl(ctx.config)}`);
}
