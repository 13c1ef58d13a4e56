import { sql } from 'drizzle-orm';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { PROVIDER_EVENT_TOKEN_RETENTION_MS } from '../src/modules/maintenance/index.ts';
import { MAILGUN_TOKEN_MEMORY_MS } from '../src/modules/provider-events/mailgun.events.ts';
import { claimProviderEventToken } from '../src/modules/provider-events/provider-event-tokens.ts';
import { createTestContext, type TestContext } from './helpers/app.ts';
import { createTeamWithKey } from './helpers/sending-team.ts';

/**
 * Review finding "growth": a Mailgun token claim (issue #11: a signature block is accepted once)
 * no longer deletes the adapter's old tokens, a delete that read every token kept in the window on
 * every event; the maintenance loop deletes them (maintenance.test.ts). A token older than the
 * window still counts as never seen. Real PostgreSQL.
 */

let ctx: TestContext;

beforeAll(async () => {
  ctx = await createTestContext('postgres');
});
afterAll(async () => {
  await ctx?.close();
});

async function tokensOf(adapterId: string): Promise<string[]> {
  const result = (await ctx.context.db.execute(
    sql`select token from provider_event_tokens where adapter_id = ${adapterId} order by token`,
  )) as unknown as { rows: { token: string }[] };
  return result.rows.map((row) => row.token);
}

describe('claimProviderEventToken', () => {
  it('refuses a replay within the window, accepts the token again after it, and deletes no other token', async () => {
    const { adapterId } = await createTeamWithKey(ctx.app);
    const { db } = ctx.context;
    const claim = (token: string) => claimProviderEventToken(db, adapterId, token, MAILGUN_TOKEN_MEMORY_MS);

    expect(await claim('old')).toBe(true);
    expect(await claim('old')).toBe(false);
    // "old" was seen 15 minutes ago: past Mailgun's 10-minute window.
    await db.execute(sql`update provider_event_tokens set seen_at = now() - interval '15 minutes'
      where adapter_id = ${adapterId} and token = 'old'`);

    expect(await claim('new')).toBe(true);
    // The claim of "new" left "old" to the maintenance loop.
    expect(await tokensOf(adapterId)).toEqual(['new', 'old']);
    expect(await claim('new')).toBe(false);
    expect(await claim('old')).toBe(true);
    // Taken over: seen now, so a replay of it is refused again for a whole window.
    expect(await claim('old')).toBe(false);
  });

  it('refuses a window longer than the maintenance loop keeps tokens (a replay would outlive its token)', async () => {
    const { adapterId } = await createTeamWithKey(ctx.app);
    await expect(
      claimProviderEventToken(ctx.context.db, adapterId, 'token', PROVIDER_EVENT_TOKEN_RETENTION_MS + 1),
    ).rejects.toThrow(RangeError);
    expect(await tokensOf(adapterId)).toEqual([]);
  });
});
