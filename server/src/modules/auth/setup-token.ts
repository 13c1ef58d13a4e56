import { createHash, randomBytes, timingSafeEqual } from 'node:crypto';
import type { Config } from '../../config.ts';
import type { Executor } from '../../db/client.ts';
import { anyUserExists } from './auth.repository.ts';

/**
 * `config` with its setup token settled (issue #2): SETUP_TOKEN when configured, otherwise a
 * random 32-byte base64url token. The context (server/src/context.ts) calls it once, so a token is
 * generated per started process (a restart prints a new one) and is never module state: two
 * contexts in one process hold their own.
 * @returns a copy of `config` whose SETUP_TOKEN is set.
 */
export function withSetupToken<C extends Pick<Config, 'SETUP_TOKEN'>>(
  config: C,
): C & { SETUP_TOKEN: string } {
  return { ...config, SETUP_TOKEN: config.SETUP_TOKEN ?? randomBytes(32).toString('base64url') };
}

/**
 * The token that authorises the first-run setup: the context's SETUP_TOKEN (see {@link withSetupToken}).
 * @throws Error when `config` has none (a config that did not come through the context).
 */
export function resolveSetupToken(config: Pick<Config, 'SETUP_TOKEN'>): string {
  if (!config.SETUP_TOKEN)
    throw new Error('No setup token: build the config through withSetupToken (context.ts)');
  return config.SETUP_TOKEN;
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
