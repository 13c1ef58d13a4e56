import { sql } from 'drizzle-orm';
import type { Executor } from '../../db/client.ts';
import { providerEventTokens } from '../../db/schema/index.ts';

/**
 * Claims signature `token` for adapter `adapterId` in the database, so that every process sees it
 * (issue #11: a Mailgun signature block is accepted once). ONE statement: the adapter's tokens
 * older than `keepMs` go, then the token is inserted unless already there.
 * @param keepMs how long a claimed token is kept (ms): at least the span of timestamps a signature
 *   is accepted for, so no replay outlives its token.
 * @returns true when this call claimed it; false when it was claimed before (a replay).
 */
export async function claimProviderEventToken(
  db: Executor,
  adapterId: string,
  token: string,
  keepMs: number,
): Promise<boolean> {
  const result = (await db.execute(sql`
    with expired as (
      delete from ${providerEventTokens}
      where adapter_id = ${adapterId} and seen_at < now() - make_interval(secs => ${keepMs / 1000})
    )
    insert into ${providerEventTokens} (adapter_id, token) values (${adapterId}, ${token})
    on conflict do nothing
    returning token`)) as unknown as { rows: unknown[] };
  return result.rows.length > 0;
}
