import type { Database, Executor } from '../../db/client.ts';
import { AppError, notFound } from '../../http/errors.ts';
import { newId } from '../../ids.ts';
import { ConfigDecryptionError, decryptConfig, encryptConfig } from './adapter-crypto.ts';
import { adapterEventsUrl } from './adapter-events-url.ts';
import { adapterConfig, type ProviderDeps, providerFor } from './adapter-provider.ts';
import { type AdapterType, parseAdapterConfig } from './adapter-types.ts';
import { type AdapterRow, adapterRepository } from './adapters.repository.ts';
import type { AdapterView } from './adapters.schema.ts';
import type { AdapterSendCache } from './adapters.send-cache.ts';

/** Adapter without its config (spec: config only in get-one). */
export function presentAdapter(row: AdapterRow): AdapterView {
  return {
    id: row.id,
    name: row.name,
    type: row.type,
    defaultFrom: row.defaultFrom,
    isDefault: row.isDefault,
    isActive: row.isActive,
    fallbackAdapterId: row.fallbackAdapterId,
    createdAt: row.createdAt.toISOString(),
    updatedAt: row.updatedAt.toISOString(),
  };
}

export { adapterConfig } from './adapter-provider.ts';

/**
 * Re-encrypts every config still stored in the v1 format (no associated data) as v2, bound to its
 * row (issue #8), so old rows stop being movable between adapters. Runs at start-up; idempotent and
 * safe when several processes start at once (each row is swapped only if unchanged). A row that no
 * longer decrypts is left as it is (it is unusable either way).
 * @returns how many rows were re-encrypted.
 */
export async function upgradeLegacyAdapterConfigs(db: Executor, encryptionKey: Buffer): Promise<number> {
  let upgraded = 0;
  for (const row of await adapterRepository.listLegacyEncrypted(db)) {
    const binding = { teamId: row.teamId, adapterId: row.id };
    let config: object;
    try {
      config = decryptConfig(encryptionKey, row.configEncrypted, binding) as object;
    } catch (error) {
      if (error instanceof ConfigDecryptionError) continue;
      throw error;
    }
    const next = encryptConfig(encryptionKey, config, binding);
    if (await adapterRepository.replaceCiphertext(db, row, row.configEncrypted, next)) upgraded += 1;
  }
  return upgraded;
}

/**
 * The adapters `refs` name, each only if it exists in its stated team, by id (one query; the
 * worker loads a whole batch's adapters at once).
 */
export async function findAdapters(
  db: Executor,
  refs: readonly { teamId: string; id: string }[],
): Promise<Map<string, AdapterRow>> {
  return new Map((await adapterRepository.findMany(db, refs)).map((row) => [row.id, row]));
}

/**
 * Creates an adapter with its config validated for its type and encrypted. The team's first
 * adapter becomes its default; `isDefault: true` moves the default to this one.
 * @throws VALIDATION_ERROR with issues under `config.` for a bad config.
 */
export async function createAdapter(
  db: Database,
  sendCache: AdapterSendCache,
  encryptionKey: Buffer,
  teamId: string,
  input: {
    name: string;
    type: AdapterType;
    config: unknown;
    defaultFrom?: string | undefined;
    isDefault?: boolean | undefined;
    fallbackAdapterId?: string | null | undefined;
  },
): Promise<AdapterRow> {
  const config = parseAdapterConfig(input.type, input.config);
  const created = await db.transaction(async (tx) => {
    await adapterRepository.lockTeamDefault(tx, teamId);
    const id = newId('adapter');
    await checkFallback(tx, teamId, id, input.fallbackAdapterId);
    const isDefault = input.isDefault ?? !(await adapterRepository.hasDefault(tx, teamId));
    if (isDefault) await adapterRepository.clearDefault(tx, teamId, id);
    return adapterRepository.insert(tx, {
      id,
      teamId,
      name: input.name,
      type: input.type,
      configEncrypted: encryptConfig(encryptionKey, config, { teamId, adapterId: id }),
      defaultFrom: input.defaultFrom ?? null,
      isDefault,
      fallbackAdapterId: input.fallbackAdapterId ?? null,
    });
  });
  sendCache.forgetTeam(teamId);
  return created;
}

/** Longest fallback chain an adapter may start (longer ones are refused: their end is not checked). */
const MAX_FALLBACK_CHAIN = 100;

/**
 * Checks that adapter `id` may fall back to `fallbackId` (issue #10): an adapter of the same team,
 * not itself, and no cycle (following the fallback's own fallbacks never comes back to `id`).
 * Call inside the transaction that holds the team's adapter lock.
 * @throws VALIDATION_ERROR (400) with `details.issues = [{path: 'fallbackAdapterId', message}]`.
 */
async function checkFallback(
  db: Executor,
  teamId: string,
  id: string,
  fallbackId: string | null | undefined,
): Promise<void> {
  if (fallbackId === null || fallbackId === undefined) return;
  const refuse = (message: string) => {
    throw new AppError('VALIDATION_ERROR', 'Invalid fallback adapter', {
      issues: [{ path: 'fallbackAdapterId', message }],
    });
  };
  if (fallbackId === id) refuse('An adapter cannot be its own fallback');
  const seen = new Set<string>([id]);
  let next: string | null = fallbackId;
  for (let depth = 0; next !== null && depth < MAX_FALLBACK_CHAIN; depth += 1) {
    const row = await adapterRepository.findInTeam(db, teamId, next);
    if (!row)
      return refuse(depth === 0 ? 'No adapter with this id in the team' : 'The fallback chain is broken');
    seen.add(row.id);
    next = row.fallbackAdapterId;
    if (next !== null && seen.has(next)) refuse('The fallback chain would loop back to this adapter');
  }
  // A chain past the bound was let through unchecked, and a loop closed behind it (review finding,
  // session 16).
  if (next !== null) refuse(`A fallback chain may hold at most ${MAX_FALLBACK_CHAIN} adapters`);
}

/** @throws NOT_FOUND when the adapter is not the team's. */
export async function getAdapter(db: Executor, teamId: string, id: string): Promise<AdapterRow> {
  const row = await adapterRepository.findInTeam(db, teamId, id);
  if (!row) throw notFound('Adapter');
  return row;
}

/**
 * One adapter with its decrypted config (spec: only the single-adapter read returns it).
 * @throws NOT_FOUND; CONFLICT (409) with `details.reason = "CONFIG_UNREADABLE"` when the stored
 *   config does not decrypt with the ENCRYPTION_KEY in use (the key changed since it was written):
 *   the caller re-enters it with `PUT /api/adapters/:id`, which needs no decryption. It was a bare
 *   500 (review finding, integrity 3).
 */
export async function getAdapterWithConfig(
  db: Executor,
  encryptionKey: Buffer,
  baseUrl: string,
  teamId: string,
  id: string,
) {
  const row = await getAdapter(db, teamId, id);
  let config: Record<string, unknown>;
  try {
    config = adapterConfig(row, encryptionKey);
  } catch (error) {
    if (!(error instanceof ConfigDecryptionError)) throw error;
    throw new AppError(
      'CONFLICT',
      "This adapter's configuration cannot be read with the server's current ENCRYPTION_KEY (saved under another key, or damaged): enter the configuration again to replace it",
      { reason: 'CONFIG_UNREADABLE' },
    );
  }
  return {
    ...presentAdapter(row),
    config,
    // Issue #11: the provider-events URL (with its token); SMTP servers post no events.
    eventsUrl: row.type === 'smtp' ? null : adapterEventsUrl(baseUrl, encryptionKey, row.id),
  };
}

/** The team's adapters, newest first, without their configs (spec: config only in get-one). */
export async function listAdapters(db: Executor, teamId: string): Promise<AdapterView[]> {
  return (await adapterRepository.listByTeam(db, teamId)).map(presentAdapter);
}

/**
 * Updates an adapter; a new config is validated against the adapter's type and replaces the old one.
 * @throws NOT_FOUND, VALIDATION_ERROR.
 */
export async function updateAdapter(
  db: Database,
  sendCache: AdapterSendCache,
  encryptionKey: Buffer,
  teamId: string,
  id: string,
  input: {
    name?: string | undefined;
    config?: unknown;
    defaultFrom?: string | null | undefined;
    isDefault?: boolean | undefined;
    isActive?: boolean | undefined;
    fallbackAdapterId?: string | null | undefined;
  },
): Promise<AdapterRow> {
  const updated = await db.transaction(async (tx) => {
    const current = await getAdapter(tx, teamId, id);
    if (input.fallbackAdapterId !== undefined && input.fallbackAdapterId !== current.fallbackAdapterId) {
      // Serialised per team, so two concurrent changes cannot close a cycle between them.
      await adapterRepository.lockTeamDefault(tx, teamId);
      await checkFallback(tx, teamId, id, input.fallbackAdapterId);
    }
    const changes: Partial<AdapterRow> = {};
    if (input.name !== undefined) changes.name = input.name;
    if (input.defaultFrom !== undefined) changes.defaultFrom = input.defaultFrom;
    if (input.isActive !== undefined) changes.isActive = input.isActive;
    if (input.fallbackAdapterId !== undefined) changes.fallbackAdapterId = input.fallbackAdapterId;
    if (input.isDefault !== undefined) changes.isDefault = input.isDefault;
    if (input.config !== undefined) {
      const config = parseAdapterConfig(current.type as AdapterType, input.config);
      changes.configEncrypted = encryptConfig(encryptionKey, config, { teamId, adapterId: id });
    }
    if (input.isDefault) {
      await adapterRepository.lockTeamDefault(tx, teamId);
      await adapterRepository.clearDefault(tx, teamId, id);
    }
    const row = await adapterRepository.update(tx, teamId, id, changes);
    if (!row) throw notFound('Adapter');
    return row;
  });
  sendCache.forgetTeam(teamId);
  return updated;
}

/**
 * Deletes an adapter, under the team's adapter lock (as fallback and default changes are): a
 * fallback checked by a concurrent update or create cannot be deleted before that change commits
 * (the change's foreign key failed with a 500, review finding, session 14); it is deleted after,
 * the foreign key then clearing the fallback.
 * @throws NOT_FOUND when the adapter is not the team's.
 */
export async function deleteAdapter(
  db: Database,
  sendCache: AdapterSendCache,
  teamId: string,
  id: string,
): Promise<void> {
  const deleted = await db.transaction(async (tx) => {
    await adapterRepository.lockTeamDefault(tx, teamId);
    return adapterRepository.delete(tx, teamId, id);
  });
  if (!deleted) throw notFound('Adapter');
  sendCache.forgetTeam(teamId);
}

/**
 * Checks the adapter's credentials through the same provider the worker sends with
 * ({@link providerFor}; spec "POST /api/adapters/:id/test"): SMTP connects and authenticates, the
 * hosted APIs make a cheap authenticated read (issue #10). A failure is a result
 * `{success: false, message}`, not an error: for SMTP a fixed message of ours, never the remote
 * server's bytes (issue #8); for a hosted API the provider's own error message.
 * @throws NOT_FOUND when the adapter is not the team's.
 */
export async function testAdapter(
  db: Executor,
  deps: ProviderDeps,
  teamId: string,
  id: string,
): Promise<{ success: boolean; message: string }> {
  const row = await getAdapter(db, teamId, id);
  try {
    return await providerFor(deps, row).verify();
  } catch (error) {
    return { success: false, message: error instanceof Error ? error.message : String(error) };
  }
}

/**
 * The adapter a send goes through: the team's default adapter when active, otherwise its oldest
 * active adapter (issue #2).
 * @throws VALIDATION_ERROR (400) with details.reason = "NO_ACTIVE_ADAPTER" when the team has none.
 */
export async function resolveSendingAdapter(db: Executor, teamId: string): Promise<AdapterRow> {
  const [adapter] = await adapterRepository.activeByPreference(db, teamId);
  if (!adapter) {
    throw new AppError('VALIDATION_ERROR', 'No active email adapter is configured for this team', {
      reason: 'NO_ACTIVE_ADAPTER',
    });
  }
  return adapter;
}

/**
 * {@link resolveSendingAdapter} through the context's `sendCache` (issue #9 "Cheap
 * hot path"): no database round trip on a hit; changes through another process are seen within
 * ADAPTER_SEND_CACHE_TTL_MS. The row is shared: read-only.
 * @throws VALIDATION_ERROR (400) NO_ACTIVE_ADAPTER as resolveSendingAdapter (not cached).
 */
export function cachedSendingAdapter(
  db: Executor,
  sendCache: AdapterSendCache,
  teamId: string,
): Promise<AdapterRow> {
  return sendCache.get(teamId, 'sending', () => resolveSendingAdapter(db, teamId));
}

/** An adapter row by id within the team, or undefined (the worker decides what a missing one means). */
export function findAdapter(db: Executor, teamId: string, id: string): Promise<AdapterRow | undefined> {
  return adapterRepository.findInTeam(db, teamId, id);
}

/**
 * An adapter row by id in whichever team owns it, or undefined. Only for callers that authenticated
 * the caller against the adapter itself (the provider-events URL token, issue #11).
 */
export function findAdapterById(db: Executor, id: string): Promise<AdapterRow | undefined> {
  return adapterRepository.findById(db, id);
}
