import { sql } from 'drizzle-orm';
import { TypeID } from 'typeid-js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestContext, type TestContext, waitFor } from './helpers/app.ts';
import { expectError, send } from './helpers/factories.ts';
import { createTeamWithKey, type SendingTeam } from './helpers/sending-team.ts';

/**
 * Review finding (time 2): cancel reads the email's log before its transaction; a worker that
 * completes the send job and records `sent` (one commit) between that read and the cancel's look
 * at the job made cancel answer `details.status` "processed" for an email plainly `sent`.
 * No workers run here: the test plays the worker's commit itself, at the exact point of the race.
 */
describe('cancel racing the end of a send', () => {
  let ctx: TestContext;
  let team: SendingTeam;

  beforeAll(async () => {
    ctx = await createTestContext('postgres');
    team = await createTeamWithKey(ctx.app);
  });
  afterAll(async () => {
    await ctx?.close();
  });

  const query = async <T>(statement: ReturnType<typeof sql>) =>
    ((await ctx.app.ctx.database.db.execute(statement)) as unknown as { rows: T[] }).rows;

  const cancel = (id: string) =>
    ctx.app.inject({ method: 'POST', url: `/api/v1/${id}/cancel`, headers: { 'x-api-key': team.key } });

  /** A scheduled email, queued and waiting: its id and its job's pg-boss UUID. */
  const scheduledEmail = async (to: string) => {
    const response = await send(ctx.app, team.key, {
      templateId: team.templateId,
      to,
      scheduledAt: new Date(Date.now() + 600_000).toISOString(),
    });
    expect(response.statusCode, response.body).toBe(202);
    const { id, jobId } = response.json().data;
    return { id: id as string, jobUuid: TypeID.fromString(jobId).toUUID() };
  };

  it('answers `sent` for an email whose send completed after cancel read it as queued', async () => {
    const { id, jobUuid } = await scheduledEmail('race@example.test');
    // The worker's transaction: it holds the job's row (as its completion statement does) ...
    const worker = await ctx.app.ctx.database.pool.connect();
    try {
      await worker.query('begin');
      await worker.query('select 1 from pgboss.job where id = $1 for update', [jobUuid]);
      // ... while cancel reads the log (queued) and then waits for that row.
      const cancelled = cancel(id);
      await waitFor(
        async () => {
          const [waiting] = await query<{ n: number }>(
            sql`select count(*)::int as n from pg_stat_activity
              where datname = current_database() and wait_event_type = 'Lock'
                and query like '%pgboss.job set state = ''cancelled''%'`,
          );
          return waiting!.n > 0 ? true : undefined;
        },
        20_000,
        'cancel waiting for the job row',
      );
      // The send's outcome and its job's completion commit together (queue.ts completionSql).
      await worker.query(`update pgboss.job set state = 'completed', completed_on = now() where id = $1`, [
        jobUuid,
      ]);
      await worker.query(
        `update email_logs set status = 'sent', sent_at = now(), attempt_count = 1 where id = $1`,
        [id],
      );
      await worker.query('commit');
      const refused = expectError(await cancelled, 400, 'VALIDATION_ERROR');
      expect(refused.details).toEqual({ reason: 'NOT_CANCELLABLE', status: 'sent' });
    } finally {
      worker.release();
    }
    const [log] = await query<{ status: string }>(sql`select status::text from email_logs where id = ${id}`);
    expect(log!.status).toBe('sent');
  });

  it('still answers `processed` for an email whose job is over while it is still queued', async () => {
    const { id, jobUuid } = await scheduledEmail('processed@example.test');
    await query(
      sql`update pgboss.job set state = 'completed', completed_on = now() where id = ${jobUuid}::uuid`,
    );
    const refused = expectError(await cancel(id), 400, 'VALIDATION_ERROR');
    expect(refused.details).toEqual({ reason: 'NOT_CANCELLABLE', status: 'processed' });
  });
});
