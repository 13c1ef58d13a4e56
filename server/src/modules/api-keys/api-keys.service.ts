import type { Executor } from '../../db/client.ts';
import { isoOrNull } from '../../http/envelope.ts';
import { AppError, notFound } from '../../http/errors.ts';
import { newId } from '../../ids.ts';
import type { ApiKeyCache } from './api-key-cache.ts';
import { apiKeyPrefix, generateApiKeySecret, hashApiKeySecret } from './api-key-secret.ts';
import {
  type ApiKeyFilter,
  type ApiKeyRow,
  type ApiKeyWithCreator,
  apiKeyRepository,
} from './api-keys.repository.ts';
import { type ApiKeyScope, type ApiKeyView, DEFAULT_RATE_LIMIT } from './api-keys.schema.ts';
import type { UnknownKeyThrottle } from './unknown-key-throttle.ts';

/** The read shape of a key (spec "API key") without its creator; never the secret or its hash. */
export function presentApiKey(row: ApiKeyRow): Omit<ApiKeyView, 'creator'> {
  return {
    id: row.id,
    name: row.name,
    keyPrefix: row.keyPrefix,
    scopes: row.scopes,
    rateLimit: row.rateLimit,
    expiresAt: isoOrNull(row.expiresAt),
    lastUsedAt: isoOrNull(row.lastUsedAt),
    isActive: row.isActive,
    createdBy: row.createdBy,
    createdAt: row.createdAt.toISOString(),
    updatedAt: row.updatedAt.toISOString(),
  };
}

/** The list/get shape: {@link presentApiKey} plus `creator` with their membership (issue #8). */
function presentApiKeyWithCreator({ key, creatorName, creatorEmail, creatorIsMember }: ApiKeyWithCreator) {
  const creator =
    key.createdBy !== null && creatorName !== null && creatorEmail !== null
      ? {
          id: key.createdBy,
          name: creatorName,
          email: creatorEmail,
          status: creatorIsMember ? ('member' as const) : ('removed' as const),
        }
      : null;
  return { ...presentApiKey(key), creator };
}

/**
 * Creates a key for `teamId`. Returns its view plus `key`, the secret, which is shown only here
 * and by regenerate (spec "API key": never retrievable afterwards; only its SHA-256 is stored).
 * Defaults: scopes ["send"], rateLimit 100 per minute (issue #2).
 */
export async function createApiKey(
  db: Executor,
  teamId: string,
  userId: string,
  input: {
    name: string;
    scopes?: ApiKeyScope[] | undefined;
    rateLimit?: number | undefined;
    expiresAt?: string | null | undefined;
  },
): Promise<Omit<ApiKeyView, 'creator'> & { key: string }> {
  const key = generateApiKeySecret();
  const row = await apiKeyRepository.insert(db, {
    id: newId('apiKey'),
    teamId,
    name: input.name,
    keyHash: hashApiKeySecret(key),
    keyPrefix: apiKeyPrefix(key),
    scopes: input.scopes ?? ['send'],
    rateLimit: input.rateLimit ?? DEFAULT_RATE_LIMIT,
    expiresAt: input.expiresAt ? new Date(input.expiresAt) : null,
    createdBy: userId,
  });
  return { ...presentApiKey(row), key };
}

/**
 * The team's keys, newest first, without secrets, each with its `creator` and whether they are still
 * a member; `filter` narrows by `createdBy` (a user id) and `creatorStatus` (issue #8).
 */
export async function listApiKeys(
  db: Executor,
  teamId: string,
  filter: Pick<ApiKeyFilter, 'createdBy' | 'creatorStatus'> = {},
): Promise<ApiKeyView[]> {
  return (await apiKeyRepository.listWithCreator(db, teamId, filter)).map(presentApiKeyWithCreator);
}

/** One key with its `creator`. @throws NOT_FOUND when the key is not the team's. */
export async function getApiKey(db: Executor, teamId: string, id: string): Promise<ApiKeyView> {
  const [row] = await apiKeyRepository.listWithCreator(db, teamId, { id });
  if (!row) throw notFound('API key');
  return presentApiKeyWithCreator(row);
}

/**
 * Changes a key; this process stops serving the old state at once (`cache`), others within
 * API_KEY_CACHE_TTL_MS. @throws NOT_FOUND when the key is not the team's.
 */
export async function updateApiKey(
  db: Executor,
  cache: ApiKeyCache,
  teamId: string,
  id: string,
  changes: {
    name?: string | undefined;
    scopes?: ApiKeyScope[] | undefined;
    rateLimit?: number | undefined;
    isActive?: boolean | undefined;
  },
): Promise<Omit<ApiKeyView, 'creator'>> {
  const defined = Object.fromEntries(Object.entries(changes).filter(([, v]) => v !== undefined));
  const row = await apiKeyRepository.update(db, teamId, id, defined);
  if (!row) throw notFound('API key');
  cache.evict(id);
  return presentApiKey(row);
}

/**
 * Permanent delete; refused at once by this process, by others within API_KEY_CACHE_TTL_MS.
 * @throws NOT_FOUND when the key is not the team's.
 */
export async function deleteApiKey(
  db: Executor,
  cache: ApiKeyCache,
  teamId: string,
  id: string,
): Promise<void> {
  if (!(await apiKeyRepository.delete(db, teamId, id))) throw notFound('API key');
  cache.evict(id);
}

/**
 * Replaces the secret of the same key record; the old secret fails from this moment in this process
 * (spec "Authentication" 6), in others within API_KEY_CACHE_TTL_MS.
 * @throws NOT_FOUND when the key is not the team's.
 */
export async function regenerateApiKey(
  db: Executor,
  cache: ApiKeyCache,
  teamId: string,
  id: string,
): Promise<Omit<ApiKeyView, 'creator'> & { key: string }> {
  const key = generateApiKeySecret();
  const row = await apiKeyRepository.update(db, teamId, id, {
    keyHash: hashApiKeySecret(key),
    keyPrefix: apiKeyPrefix(key),
  });
  if (!row) throw notFound('API key');
  cache.evict(id);
  return { ...presentApiKey(row), key };
}

/** Who is asking, for {@link authenticateApiKey}'s bound on unknown keys. */
export interface ApiKeyClient {
  throttle: UnknownKeyThrottle;
  /** The client as {@link throttleClientOf} names it. */
  client: string;
}

/**
 * Resolves an `X-API-Key` secret to its key record (spec "Authentication" 1-3, case rule 2), through
 * `cache`: no database read for a key verified less than API_KEY_CACHE_TTL_MS ago (issue #9).
 * With `asker`, a key the cache does not hold is looked up only while the client has caused fewer
 * than UNKNOWN_KEYS_PER_MINUTE lookups of unknown keys in its minute (unknown-key-throttle.ts).
 * @throws UNAUTHORIZED when no key was sent, INVALID_TOKEN when it is unknown or inactive,
 *   TOKEN_EXPIRED when expiresAt is in the past, RATE_LIMITED (429, `details.retryAfterSeconds`)
 *   when the client's budget of unknown keys is spent and this key is not cached.
 */
export async function authenticateApiKey(
  db: Executor,
  cache: ApiKeyCache,
  secret: string | undefined,
  now: Date,
  asker?: ApiKeyClient,
): Promise<ApiKeyRow> {
  if (!secret) throw new AppError('UNAUTHORIZED', 'Missing X-API-Key header');
  const keyHash = secret.startsWith('svc_') ? hashApiKeySecret(secret) : undefined;
  const row = keyHash
    ? await cache.get(keyHash, async () => {
        const lookup = asker ? await asker.throttle.begin(asker.client) : undefined;
        if (typeof lookup === 'number') {
          throw new AppError('RATE_LIMITED', 'Too many requests with unknown API keys from this address', {
            retryAfterSeconds: lookup,
          });
        }
        let unknown = false;
        try {
          const found = await apiKeyRepository.findByHash(db, keyHash);
          unknown = !found;
          return found;
        } finally {
          // Only a key that does not exist counts (not one found, nor a read that failed).
          lookup?.(unknown);
        }
      })
    : undefined;
  if (!row?.isActive) throw new AppError('INVALID_TOKEN', 'Invalid API key');
  if (row.expiresAt && row.expiresAt.getTime() <= now.getTime()) {
    throw new AppError('TOKEN_EXPIRED', 'API key has expired', { expiresAt: row.expiresAt.toISOString() });
  }
  return row;
}

/** lastUsedAt is written at most once per this many ms per key (a write per request is waste). */
export const LAST_USED_GRANULARITY_MS = 60_000;

/**
 * Records that the key was used at `now`, unless it already was within the last minute: `key` is the
 * cached row, so its lastUsedAt is updated too, and the SQL skips the write when another process
 * recorded a use within the minute.
 */
export async function recordApiKeyUse(db: Executor, key: ApiKeyRow, now: Date): Promise<void> {
  if (key.lastUsedAt && now.getTime() - key.lastUsedAt.getTime() < LAST_USED_GRANULARITY_MS) return;
  key.lastUsedAt = now;
  await apiKeyRepository.touchLastUsed(db, key.id, now, new Date(now.getTime() - LAST_USED_GRANULARITY_MS));
}
