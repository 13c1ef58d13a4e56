import type { Executor } from '../../db/client.ts';
import { isoOrNull } from '../../http/envelope.ts';
import { AppError, notFound } from '../../http/errors.ts';
import { newId } from '../../ids.ts';
import { apiKeyPrefix, generateApiKeySecret, hashApiKeySecret } from './api-key-secret.ts';
import { type ApiKeyRow, apiKeyRepository } from './api-keys.repository.ts';
import { type ApiKeyScope, type ApiKeyView, DEFAULT_RATE_LIMIT } from './api-keys.schema.ts';

/** The read shape of a key (spec "API key"); never includes the secret or its hash. */
export function presentApiKey(row: ApiKeyRow): ApiKeyView {
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
): Promise<ApiKeyView & { key: string }> {
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

/** The team's keys, newest first, without secrets. */
export async function listApiKeys(db: Executor, teamId: string): Promise<ApiKeyView[]> {
  return (await apiKeyRepository.listByTeam(db, teamId)).map(presentApiKey);
}

/** @throws NOT_FOUND when the key is not the team's. */
export async function getApiKey(db: Executor, teamId: string, id: string): Promise<ApiKeyView> {
  const row = await apiKeyRepository.findInTeam(db, teamId, id);
  if (!row) throw notFound('API key');
  return presentApiKey(row);
}

/** @throws NOT_FOUND when the key is not the team's. */
export async function updateApiKey(
  db: Executor,
  teamId: string,
  id: string,
  changes: {
    name?: string | undefined;
    scopes?: ApiKeyScope[] | undefined;
    rateLimit?: number | undefined;
    isActive?: boolean | undefined;
  },
): Promise<ApiKeyView> {
  const defined = Object.fromEntries(Object.entries(changes).filter(([, v]) => v !== undefined));
  const row = await apiKeyRepository.update(db, teamId, id, defined);
  if (!row) throw notFound('API key');
  return presentApiKey(row);
}

/** Permanent delete. @throws NOT_FOUND when the key is not the team's. */
export async function deleteApiKey(db: Executor, teamId: string, id: string): Promise<void> {
  if (!(await apiKeyRepository.delete(db, teamId, id))) throw notFound('API key');
}

/**
 * Replaces the secret of the same key record; the old secret fails from this moment
 * (spec "Authentication" 6). @throws NOT_FOUND when the key is not the team's.
 */
export async function regenerateApiKey(
  db: Executor,
  teamId: string,
  id: string,
): Promise<ApiKeyView & { key: string }> {
  const key = generateApiKeySecret();
  const row = await apiKeyRepository.update(db, teamId, id, {
    keyHash: hashApiKeySecret(key),
    keyPrefix: apiKeyPrefix(key),
  });
  if (!row) throw notFound('API key');
  return { ...presentApiKey(row), key };
}

/**
 * Resolves an `X-API-Key` secret to its key record (spec "Authentication" 1-3, case rule 2).
 * @throws UNAUTHORIZED when no key was sent, INVALID_TOKEN when it is unknown or inactive,
 *   TOKEN_EXPIRED when expiresAt is in the past.
 */
export async function authenticateApiKey(
  db: Executor,
  secret: string | undefined,
  now: Date,
): Promise<ApiKeyRow> {
  if (!secret) throw new AppError('UNAUTHORIZED', 'Missing X-API-Key header');
  const row = secret.startsWith('svc_')
    ? await apiKeyRepository.findByHash(db, hashApiKeySecret(secret))
    : undefined;
  if (!row?.isActive) throw new AppError('INVALID_TOKEN', 'Invalid API key');
  if (row.expiresAt && row.expiresAt.getTime() <= now.getTime()) {
    throw new AppError('TOKEN_EXPIRED', 'API key has expired', { expiresAt: row.expiresAt.toISOString() });
  }
  return row;
}

/** lastUsedAt is written at most once per this many ms per key (a write per request is waste). */
export const LAST_USED_GRANULARITY_MS = 60_000;

/** Records that the key was used at `now`, unless it already was within the last minute. */
export async function recordApiKeyUse(db: Executor, key: ApiKeyRow, now: Date): Promise<void> {
  if (key.lastUsedAt && now.getTime() - key.lastUsedAt.getTime() < LAST_USED_GRANULARITY_MS) return;
  await apiKeyRepository.touchLastUsed(db, key.id, now);
}
