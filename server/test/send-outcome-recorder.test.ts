import { eq, inArray } from 'drizzle-orm';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { emailLogs } from '../src/db/schema/index.ts';
import { SendOutcomeRecorder } from '../src/modules/emails/send-outcome-recorder.ts';
import { createTestContext, type TestContext } from './helpers/app.ts';
import { send } from './helpers/factories.ts';
import { createTeamWithKey } from './helpers/sending-team.ts';

/**
 * The worker's group commit of outcomes (issue #9) on real PostgreSQL: a transaction that is slow
 * to commit does not hold back the outcomes that arrive after it.
 */
describe('SendOutcomeRecorder', () => {
  let ctx: TestContext;

  beforeAll(async () => {
    ctx = await createTestContext('postgres');
  });
  afterAll(() => ctx?.close());

  it('commits a later outcome while an earlier group is still waiting to commit', async () => {
    // A team of its own (CONVENTIONS.md) with two queued emails. No worker runs: the emails stay
    // queued for the recorder, and the adapter's port has nothing listening.
    const { owner, key, templateId } = await createTeamWithKey(ctx.app, { template: { name: 'Recorder' } });
    const ids: string[] = [];
    for (const to of ['held@example.test', 'next@example.test']) {
      const response = await send(ctx.app, key, { templateId, to });
      expect(response.statusCode, response.body).toBe(202);
      ids.push(response.json().data.id);
    }
    const [held, next] = ids as [string, string];
    const recorder = new SendOutcomeRecorder(ctx.app.ctx.database.db);
    // Another session locks the first email's row: the group recording it blocks until released.
    const locker = new pg.Client({ connectionString: ctx.app.ctx.database.connectionString });
    await locker.connect();
    let first: Promise<unknown> | undefined;
    try {
      await locker.query('begin');
      await locker.query('select id from email_logs where id = $1 for update', [held]);
      first = recorder.record({ id: held, teamId: owner.teamId }, sent('held'));
      await new Promise((resolve) => setTimeout(resolve, 200)); // its group is now blocked
      const second = recorder.record({ id: next, teamId: owner.teamId }, sent('next'));
      // A liveness bound, not a timing: the second group needs no lock the first one holds.
      const stalled = new Promise((resolve) => setTimeout(() => resolve('still waiting'), 5_000));
      expect(await Promise.race([second.then(() => 'committed'), stalled])).toBe('committed');
      const [row] = await ctx.app.ctx.database.db
        .select({ status: emailLogs.status })
        .from(emailLogs)
        .where(eq(emailLogs.id, next));
      expect(row?.status).toBe('sent');
    } finally {
      await locker.query('commit');
      await first;
      await locker.end();
    }
    const rows = await ctx.app.ctx.database.db
      .select({ status: emailLogs.status })
      .from(emailLogs)
      .where(inArray(emailLogs.id, ids));
    expect(rows.map((r) => r.status)).toEqual(['sent', 'sent']);
  });
});

function sent(id: string) {
  return { kind: 'sent' as const, providerMessageId: `test-${id}`, attempt: 1 };
}
