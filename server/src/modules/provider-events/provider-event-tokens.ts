import { sql } from 'drizzle-orm';
import type { Executor } from '../../db/client.ts';
import { providerEventTokens } from '../../db/schema/index.ts';
import { PROVIDER_EVENT_TOKEN_RETENTION_MS } from '../maintenance/index.ts';

/**
 * Claims signature `token` for adapter `adapterId` in the database, so that every process sees it
 * (issue #11: a Mailgun signature block is accepted once). ONE statement: the token is inserted,
 * or, when the adapter's row for it was seen more than `keepMs` ago, that row is taken over (a
 * token older than the window counts as never seen); a row seen within the window is a replay.
 * Old rows are deleted by the workers' maintenance loop (modules/maintenance), by `seen_at`: this
 * claim used to delete the adapter's old tokens first, reading every one of them kept in the
 * window, on every event (review finding "growth").
 * @param keepMs how long a claimed token is kept (ms): at least the span of timestamps a signature
 *   is accepted for, so no replay outlives its token; at most PROVIDER_EVENT_TOKEN_RETENTION_MS
 *   (1 h), how long the maintenance loop keeps a row.
 * @returns true when this call claimed it; false when it was claimed within `keepMs` (a replay).
 * @throws RangeError when `keepMs` is over PROVIDER_EVENT_TOKEN_RETENTION_MS (a programming error).
 */
export async function claimProviderEventToken(
  db: Executor,
  adapterId: string,
  token: string,
  keepMs: number,
): Promise<boolean> {
  if (keepMs > PROVIDER_EVENT_TOKEN_RETENTION_MS) {
    throw new RangeError(
      `keepMs ${keepMs} is over the tokens' retention (${PROVIDER_EVENT_TOKEN_RETENTION_MS} ms)`,
    );
  }
  const result = (await db.execute(sql`
    insert into ${providerEventTokens} (adapter_id, token) values (${adapterId}, ${token})
    on conflict (adapter_id, token) do update set seen_at = now()
      where ${providerEventTokens.seenAt} < now() - make_interval(secs => ${keepMs / 1000})
    returning token`)) as unknown as { rows: unknown[] };
  return result.rows.length > 0;
}
