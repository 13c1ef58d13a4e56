import { createHash } from 'node:crypto';
import { and, eq, isNull, sql } from 'drizzle-orm';
import type { Executor } from '../../db/client.ts';
import { isForeignKeyViolation, withoutQueryParameters } from '../../db/errors.ts';
import { idempotencyKeys } from '../../db/schema/index.ts';
import { AppError } from '../../http/errors.ts';

/**
 * `Idempotency-Key` of the public send API (issue #10): a request repeated with the same key (per
 * API key, for {@link IDEMPOTENCY_TTL_MS}) and the same body gets the original response, status
 * and body, without sending again; with a different body, 409 CONFLICT. Concurrent duplicates are
 * settled by the table's primary key (api_key_id, key): exactly one request inserts the row and
 * runs; the others wait for its response (up to {@link WAIT_FOR_FIRST_MS}).
 */

/** How long a key is remembered (24 h). */
export const IDEMPOTENCY_TTL_MS = 24 * 60 * 60 * 1000;
/** Longest key accepted. */
export const MAX_IDEMPOTENCY_KEY_LENGTH = 256;
/**
 * A claim still without a response and not refreshed for this long is taken as abandoned (its
 * process died between claiming the key and storing the answer) and may be claimed again (5 min).
 */
const ABANDONED_AFTER_SECONDS = 300;
/**
 * How often a running first request refreshes its claim (ms): a run may outlast
 * ABANDONED_AFTER_SECONDS (six PDFs rendered one after another, each up to
 * PDF_RENDER_TIMEOUT_SECONDS = 300 s), and a repeat then took the live claim over and sent a
 * second email (review finding, session 15).
 */
export const CLAIM_REFRESH_MS = 60_000;
/** How long a duplicate waits for the first request's response before answering 409. */
const WAIT_FOR_FIRST_MS = 15_000;
const POLL_MS = 25;

/**
 * Deletes every expired key (any API key), in bounded batches; returns how many. Expired keys are
 * never answered from (a claim takes them over), so this only keeps the table small. The workers'
 * maintenance loop sweeps them every 10 minutes (modules/maintenance): the sweep used to run
 * here, awaited by one keyed send in a thousand before it answered, and never once keyed requests
 * stopped (review finding "growth").
 */
export { sweepExpiredIdempotencyKeys as sweepExpired } from '../maintenance/index.ts';

/** A response to replay: HTTP status and JSON body. */
export interface StoredResponse {
  status: number;
  body: unknown;
}

/** JSON with object keys sorted, so `{a, b}` and `{b, a}` hash alike. */
function canonicalJson(value: unknown): string {
  if (Array.isArray(value)) return `[${value.map(canonicalJson).join(',')}]`;
  if (value && typeof value === 'object') {
    const entries = Object.entries(value as Record<string, unknown>)
      .filter(([, v]) => v !== undefined)
      .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
    return `{${entries.map(([k, v]) => `${JSON.stringify(k)}:${canonicalJson(v)}`).join(',')}}`;
  }
  return JSON.stringify(value) ?? 'null';
}

/**
 * `value` with every string (object keys too) made storable in a jsonb column: unpaired UTF-16
 * surrogates become U+FFFD (`String.prototype.toWellFormed`) and so does NUL, since jsonb refuses
 * both `\ud800` and `\u0000` escapes although they are valid JSON (PostgreSQL docs, "JSON Types").
 * Error messages echo client input (`Template "<id>" not found`, issue paths with variable names),
 * so a response may hold either. An object with `toJSON` (a Date) is taken as JSON would take it;
 * other values are returned as they are.
 */
export function storableJson(value: unknown): unknown {
  if (typeof value === 'string') return value.toWellFormed().replaceAll('\u0000', '\ufffd');
  if (Array.isArray(value)) return value.map(storableJson);
  if (value && typeof value === 'object') {
    const { toJSON } = value as { toJSON?: unknown };
    if (typeof toJSON === 'function') return storableJson(toJSON.call(value));
    return Object.fromEntries(
      Object.entries(value).map(([key, item]) => [storableJson(key) as string, storableJson(item)]),
    );
  }
  return value;
}

/** The key from the header value, or undefined without one. @throws VALIDATION_ERROR (400) for a bad key. */
export function idempotencyKeyOf(header: string | string[] | undefined): string | undefined {
  if (header === undefined) return undefined;
  const key = Array.isArray(header) ? header[0] : header;
  if (!key || key.length > MAX_IDEMPOTENCY_KEY_LENGTH || !/^[\x21-\x7e]+$/.test(key)) {
    throw new AppError('VALIDATION_ERROR', 'Invalid Idempotency-Key header', {
      issues: [
        {
          path: 'headers.idempotency-key',
          message: `must be 1-${MAX_IDEMPOTENCY_KEY_LENGTH} printable ASCII characters without spaces`,
        },
      ],
    });
  }
  return key;
}

/**
 * Runs `run` at most once per (API key, key) within 24 h and answers what the first run answered.
 * `route` and `body` form the request fingerprint (SHA-256 of the route and the body as canonical
 * JSON). The first run's answer is stored when it is a success or a client error (4xx AppError,
 * stored as its error envelope, strings made storable by {@link storableJson}, so a replay shows
 * U+FFFD where the first answer echoed an unpaired surrogate or NUL); on any other error the key
 * is released so the client may retry. The answer is stored as JSON text, so a replay keeps its
 * keys' order and serialises to the same bytes (review finding, session 15: a jsonb column
 * reordered them). The answer is returned even when storing it fails (logged
 * without the statement's values): what `run` did is committed, and an error would make the
 * client send again; the key then stays claimed without a response (a repeat answers 409
 * IN_PROGRESS) until taken as abandoned after 5 min. While `run` runs its claim is refreshed every
 * `options.claimRefreshMs` (default {@link CLAIM_REFRESH_MS}), so a live run is never taken over
 * however long it takes. Without a key, just `run()`.
 * @throws CONFLICT (409) when the key was used with a different request (details.reason
 *   KEY_REUSED) or the first request is still running after 15 s (IN_PROGRESS); INVALID_TOKEN (401)
 *   when the API key was deleted after it was verified (see {@link claimKey}); what `run` throws.
 */
export async function withIdempotency(
  db: Executor,
  scope: { apiKeyId: string; teamId: string },
  key: string | undefined,
  request: { route: string; body: unknown },
  run: () => Promise<StoredResponse>,
  options: { claimRefreshMs?: number } = {},
): Promise<StoredResponse & { replayed: boolean }> {
  if (key === undefined) return { ...(await run()), replayed: false };
  const requestHash = createHash('sha256')
    .update(request.route)
    .update('\n')
    .update(canonicalJson(request.body))
    .digest('hex');
  const expiresAt = new Date(Date.now() + IDEMPOTENCY_TTL_MS);
  // Insert, or take over a row that expired or was abandoned; a live row is left alone (no row returned).
  const claimed = await claimKey(() =>
    db
      .insert(idempotencyKeys)
      .values({ apiKeyId: scope.apiKeyId, key, teamId: scope.teamId, requestHash, expiresAt })
      .onConflictDoUpdate({
        target: [idempotencyKeys.apiKeyId, idempotencyKeys.key],
        set: { requestHash, responseStatus: null, responseBody: null, createdAt: sql`now()`, expiresAt },
        setWhere: sql`${idempotencyKeys.expiresAt} < now() or (${idempotencyKeys.responseStatus} is null
        and ${idempotencyKeys.createdAt} < now() - make_interval(secs => ${ABANDONED_AFTER_SECONDS}))`,
      })
      .returning({ key: idempotencyKeys.key }),
  );
  const where = and(eq(idempotencyKeys.apiKeyId, scope.apiKeyId), eq(idempotencyKeys.key, key));
  if (claimed.length > 0) {
    let response: StoredResponse;
    // While `run` runs, the claim is refreshed, so only a dead process's claim is ever taken over.
    const refresh = setInterval(() => {
      db.update(idempotencyKeys)
        .set({ createdAt: sql`now()` })
        .where(
          and(where, eq(idempotencyKeys.requestHash, requestHash), isNull(idempotencyKeys.responseStatus)),
        )
        .catch(() => {});
    }, options.claimRefreshMs ?? CLAIM_REFRESH_MS);
    try {
      response = await run();
    } catch (error) {
      if (!(error instanceof AppError) || error.statusCode >= 500) {
        await db.delete(idempotencyKeys).where(where);
        throw error;
      }
      response = {
        status: error.statusCode,
        body: { success: false, error: { code: error.code, message: error.message, details: error.details } },
      };
    } finally {
      clearInterval(refresh);
    }
    try {
      const text = JSON.stringify(storableJson(response.body));
      await db
        .update(idempotencyKeys)
        .set({ responseStatus: response.status, responseBody: text })
        .where(where);
    } catch (error) {
      const reason = withoutQueryParameters(error);
      console.error(
        `[idempotency] response not stored (API key ${scope.apiKeyId}):`,
        reason instanceof Error ? reason.message : 'unknown error',
      );
    }
    return { ...response, replayed: false };
  }
  const deadline = Date.now() + WAIT_FOR_FIRST_MS;
  for (;;) {
    const [row] = await db.select().from(idempotencyKeys).where(where);
    if (!row) return withIdempotency(db, scope, key, request, run); // released by a failed first run
    if (row.requestHash !== requestHash) {
      throw new AppError('CONFLICT', 'This Idempotency-Key was already used with a different request', {
        reason: 'KEY_REUSED',
      });
    }
    if (row.responseStatus !== null) {
      return { status: row.responseStatus, body: JSON.parse(row.responseBody ?? 'null'), replayed: true };
    }
    if (Date.now() > deadline) {
      throw new AppError('CONFLICT', 'A request with this Idempotency-Key is still being processed', {
        reason: 'IN_PROGRESS',
      });
    }
    await new Promise((resolve) => setTimeout(resolve, POLL_MS));
  }
}

/**
 * Runs the claim's insert. The row references the API key (foreign key, ON DELETE CASCADE); a key
 * deleted after this process verified it (verified keys are kept up to 5 s, README "API keys")
 * fails the insert, which is the key's refusal a moment early: 401 INVALID_TOKEN, as the key will
 * get, instead of a 500 (review finding, session 18).
 * @throws AppError INVALID_TOKEN (401) on that foreign key; the database's other errors.
 */
async function claimKey<T>(insert: () => Promise<T>): Promise<T> {
  try {
    return await insert();
  } catch (error) {
    if (isForeignKeyViolation(error, 'idempotency_keys_api_key_id_api_keys_id_fk'))
      throw new AppError('INVALID_TOKEN', 'Invalid API key');
    throw error;
  }
}
