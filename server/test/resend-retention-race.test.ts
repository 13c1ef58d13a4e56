import { sql } from 'drizzle-orm';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { prepareSend } from '../src/modules/emails/send.service.ts';
import { MaintenanceLoop } from '../src/modules/maintenance/index.ts';
import { createTestContext, type TestContext, waitFor } from './helpers/app.ts';
import { dashboardCall } from './helpers/factories.ts';
import { cancelEmail, scheduledSend } from './helpers/retention.ts';
import { createTeamWithKey, type SendingTeam } from './helpers/sending-team.ts';

/**
 * Review finding diff19 2: a resend reads its original's attachments, then copies them in the
 * accept transaction. When LOG_RETENTION_DAYS deleted the original in between, the copy inserted
 * nothing and the resend was accepted (202) and sent without them. Now that send fails alone with
 * 404 NOT_FOUND, nothing of it written, and the other sends of its transaction commit.
 */

let ctx: TestContext;
beforeAll(async () => {
  ctx = await createTestContext('postgres');
});
afterAll(async () => {
  await ctx?.close();
});

async function count(query: ReturnType<typeof sql>): Promise<number> {
  const result = (await ctx.context.db.execute(query)) as unknown as { rows: { n: number }[] };
  return result.rows[0]!.n;
}

/** A scheduled send with one attachment, cancelled (`failed`, so resendable); its id. */
async function cancelledSendWithAttachment(team: SendingTeam): Promise<string> {
  const emailId = await scheduledSend(ctx.app, team);
  await cancelEmail(ctx.app, team, emailId);
  return emailId;
}

describe('a resend whose original retention deletes meanwhile', () => {
  it('answers 404 NOT_FOUND and writes nothing, instead of 202 without the attachments', async () => {
    const team = await createTeamWithKey(ctx.app);
    const original = await cancelledSendWithAttachment(team);
    await ctx.context.db.execute(
      sql`update email_logs set created_at = now() - interval '2 days' where id = ${original}`,
    );
    // Holding the template row holds the resend's log insert at its foreign-key check: after its
    // reads, before its copy of the attachments.
    const blocker = await ctx.context.database.pool.connect();
    let resent: Awaited<ReturnType<typeof dashboardCall>>;
    try {
      await blocker.query('begin');
      await blocker.query('select 1 from templates where id = $1 for update', [team.templateId]);
      const resending = dashboardCall(ctx.app, team.owner, 'POST', `/api/logs/${original}/resend`, {});
      await waitFor(
        async () =>
          (await count(sql`select count(*)::int as n from pg_stat_activity
            where datname = current_database() and wait_event_type = 'Lock'`)) > 0
            ? true
            : undefined,
        20_000,
        'the resend to wait for the template row',
      );
      const loop = new MaintenanceLoop({
        database: ctx.context.database,
        config: { LOG_RETENTION_DAYS: 1 },
        logger: { info() {}, error() {} },
      });
      expect((await loop.runOnce())?.emailLogs).toBe(1);
      await blocker.query('commit');
      resent = await resending;
    } finally {
      blocker.release();
    }

    expect(resent.statusCode, resent.body).toBe(404);
    expect(resent.json().error.code).toBe('NOT_FOUND');
    expect(
      await count(sql`select count(*)::int as n from email_logs where team_id = ${team.owner.teamId}`),
    ).toBe(0);
    expect(
      await count(sql`select count(*)::int as n from email_attachments where team_id = ${team.owner.teamId}`),
    ).toBe(0);
  });

  it('fails alone: the other sends of its transaction commit', async () => {
    const team = await createTeamWithKey(ctx.app);
    const caller = { teamId: team.owner.teamId, apiKeyId: null };
    const input = { templateId: team.templateId, to: 'ada@example.test', variables: { first_name: 'Ada' } };
    const plain = await prepareSend(ctx.context, caller, input);
    // A resend that read one attachment of an email that is gone by the time it commits.
    const resend = await prepareSend(ctx.context, caller, input, {
      resendOf: 'eml_deleted',
      copyAttachmentsOf: 'eml_deleted',
      attachmentCount: 1,
    });

    const [first, second] = await ctx.context.acceptBatcher.submitTogether([plain.rows, resend.rows]);

    expect(first?.status).toBe('fulfilled');
    expect(second?.status).toBe('rejected');
    expect((second as PromiseRejectedResult).reason).toMatchObject({ code: 'NOT_FOUND' });
    const logs = (await ctx.context.db.execute(
      sql`select id from email_logs where team_id = ${team.owner.teamId}`,
    )) as unknown as { rows: { id: string }[] };
    expect(logs.rows.map((row) => row.id)).toEqual([plain.accepted.id]);
  });
});
