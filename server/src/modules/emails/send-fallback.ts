import { and, eq } from 'drizzle-orm';
import type { Database } from '../../db/client.ts';
import { emailLogs } from '../../db/schema/index.ts';
import {
  type EmailProvider,
  type OutgoingEmail,
  ProviderError,
  type SendOptions,
  type SendResult,
} from '../../providers/index.ts';
import { type AdapterRow, findAdapter, type ProviderDeps, providerFor } from '../adapters/index.ts';

/**
 * Adapter fallback (issue #10): when an adapter fails an email for a retryable reason on the job's
 * last attempt, the adapter it names as `fallbackAdapterId` is tried, then that one's fallback, and
 * so on (the adapters module refuses cycles; a repeated id still stops the walk). Only a transient,
 * unambiguous ProviderError falls back: a permanent one (bad address, bad credentials) would fail
 * the same way elsewhere, and an ambiguous one may have been delivered already.
 *
 * Which adapter delivered is recorded by pointing the log's `adapter_id` at it (decision: the log
 * names the adapter that delivered, as `GET /api/logs/:id` shows it; the primary is the one whose
 * `fallbackAdapterId` led there). A fallback adapter that is missing or disabled is skipped.
 */

/** What {@link sendWithFallback} needs to know about the email being sent. */
export interface FallbackTarget {
  /** The email's log (its team and id). */
  log: { id: string; teamId: string };
  /** The adapter the email was queued with. */
  adapter: AdapterRow;
  /** True on the job's last attempt (retryCount >= retryLimit): only then is a fallback tried. */
  lastAttempt: boolean;
}

/** What {@link sendWithFallback} reads. */
export interface FallbackDeps extends ProviderDeps {
  db: Database;
}

/** Most fallbacks tried for one email. */
const MAX_FALLBACKS = 5;

/**
 * Sends `email` with `provider` (the primary adapter's); on a retryable failure of the last attempt
 * tries the fallback chain, and records the delivering adapter on the log.
 * @returns the send result of whichever adapter delivered.
 * @throws the primary's ProviderError when no fallback applies; when every fallback failed, a
 *   ProviderError (transient, so the email ends `failed` as a last attempt does) naming each
 *   adapter's error.
 */
export async function sendWithFallback(
  deps: FallbackDeps,
  target: FallbackTarget,
  provider: EmailProvider,
  email: OutgoingEmail,
  options: SendOptions,
): Promise<SendResult> {
  try {
    return await provider.send(email, options);
  } catch (error) {
    if (!(target.lastAttempt && isRetryable(error) && target.adapter.fallbackAdapterId)) throw error;
    const messages = [(error as ProviderError).message];
    const tried = new Set([target.adapter.id]);
    let nextId: string | null = target.adapter.fallbackAdapterId;
    while (nextId && !tried.has(nextId) && tried.size <= MAX_FALLBACKS && !options.signal?.aborted) {
      tried.add(nextId);
      const fallback = await findAdapter(deps.db, target.log.teamId, nextId);
      if (!fallback) break;
      nextId = fallback.fallbackAdapterId;
      if (!fallback.isActive) continue;
      let result: SendResult;
      try {
        result = await providerFor(deps, fallback).send(email, options);
      } catch (fallbackError) {
        if (fallbackError instanceof ProviderError && fallbackError.ambiguous) throw fallbackError;
        const message = fallbackError instanceof Error ? fallbackError.message : String(fallbackError);
        messages.push(`fallback ${fallback.name}: ${message}`);
        continue;
      }
      // Delivered: nothing after this may count as this fallback failing. A failed write of the
      // delivering adapter tried the next fallback, which delivered the email again, or ended it
      // `failed` though delivered (review finding, session 15); the log then keeps the primary's id.
      await deps.db
        .update(emailLogs)
        .set({ adapterId: fallback.id })
        .where(and(eq(emailLogs.teamId, target.log.teamId), eq(emailLogs.id, target.log.id)))
        .catch(() => {});
      return result;
    }
    if (messages.length === 1) throw error;
    throw new ProviderError(messages.join('; '), { permanent: false, cause: error });
  }
}

function isRetryable(error: unknown): boolean {
  return error instanceof ProviderError && !error.permanent && !error.ambiguous;
}
