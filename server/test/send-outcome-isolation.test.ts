import { sql } from 'drizzle-orm';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { uuidOfJobId } from '../src/ids.ts';
import { SendOutcomeRecorder } from '../src/modules/emails/send-outcome-recorder.ts';
import { createTestContext, type TestContext, waitFor } from './helpers/app.ts';
import { sessionHeaders } from './helpers/auth.ts';
import { expectError, send } from './helpers/factories.ts';
import { createTeamWithKey, type SendingTeam } from './helpers/sending-team.ts';
import { startTestSmtpServer, type TestSmtpServer } from './helpers/smtp-server.ts';

/*
 * Review finding, session 13: the worker records the outcomes that finish together, of any team,
 * in one statement. A team's own SMTP server answering its final reply with a 12 KB queue id (over
 * the provider-id index's 8,191 bytes) or a NUL made that statement fail, and after the retries
 * every delivered email of the group, other teams' included, stayed `queued` for good; cancel then
 * reported such an email cancelled though it was delivered.
 */
describe('one outcome the database refuses takes no other with it', () => {
  let ctx: TestContext;
  let sink: TestSmtpServer;
  let hostile: TestSmtpServer;

  beforeAll(async () => {
    ctx = await createTestContext('postgres');
    sink = await startTestSmtpServer();
    let replies = 0;
    hostile = await startTestSmtpServer({}, () =>
      ++replies % 2 === 0 ? `OK queued as ${'a1'.repeat(6_000)}` : '2.0.0 OK <\u0000x@a.prod.outlook.com>',
    );
  });
  afterAll(async () => {
    await ctx?.close();
    await sink?.close();
    await hostile?.close();
  });

  const logOf = async (team: SendingTeam, id: string) =>
    (
      await ctx.app.inject({
        method: 'GET',
        url: `/api/logs/${id}`,
        headers: sessionHeaders(ctx.app, team.owner),
      })
    ).json().data;

  it("a team's SMTP server cannot keep other teams' delivered emails from being recorded", async () => {
    const victim = await createTeamWithKey(ctx.app, { smtpPort: sink.port });
    const attacker = await createTeamWithKey(ctx.app, { smtpPort: hostile.port });
    const sent: { team: SendingTeam; id: string }[] = [];
    for (let i = 0; i < 12; i++) {
      for (const team of [victim, attacker]) {
        const response = await send(ctx.app, team.key, {
          templateId: team.templateId,
          to: `r${i}@example.test`,
        });
        expect(response.statusCode, response.body).toBe(202);
        sent.push({ team, id: response.json().data.id });
      }
    }
    await ctx.startWorkers();
    for (const { team, id } of sent) {
      const log = await waitFor(
        async () => {
          const found = await logOf(team, id);
          return found.status === 'queued' ? undefined : found;
        },
        30_000,
        `${id} to be recorded`,
      );
      expect(log.status).toBe('sent');
      expect(log.providerMessageId.length).toBeLessThanOrEqual(255);
      expect(log.providerMessageId).not.toContain('\u0000');
    }
    expect(sink.messages).toHaveLength(12);
    expect(hostile.messages).toHaveLength(12);
  });

  it('the others of a group are written when the database refuses one outcome', async () => {
    const team = await createTeamWithKey(ctx.app);
    const ids: string[] = [];
    for (const to of ['a@example.test', 'b@example.test']) {
      const response = await send(ctx.app, team.key, {
        templateId: team.templateId,
        to,
        scheduledAt: inAnHour(),
      });
      ids.push(response.json().data.id);
    }
    const recorder = new SendOutcomeRecorder(ctx.app.ctx.database.db);
    const log = (id: string) => ({ id, teamId: team.owner.teamId });
    const [refused, written] = await Promise.allSettled([
      // An attempt count PostgreSQL's integer cannot hold: refused for its data, whatever the retries.
      recorder.record(log(ids[0]!), { kind: 'retry', message: 'try later', attempt: 2 ** 40 }),
      recorder.record(log(ids[1]!), { kind: 'sent', providerMessageId: 'ok-1', attempt: 1 }),
    ]);
    expect(refused.status).toBe('rejected');
    expect(written.status).toBe('fulfilled');
    expect(await logOf(team, ids[1]!)).toMatchObject({ status: 'sent', providerMessageId: 'ok-1' });
  });

  it('cancel refuses an email whose job is over while its log still says queued', async () => {
    const team = await createTeamWithKey(ctx.app);
    const response = await send(ctx.app, team.key, {
      templateId: team.templateId,
      to: 'c@example.test',
      scheduledAt: inAnHour(),
    });
    const { id, jobId } = response.json().data;
    await ctx.app.ctx.database.db.execute(
      sql`update pgboss.job set state = 'completed', completed_on = now() where id = ${uuidOfJobId(jobId)}::uuid`,
    );
    const cancel = await ctx.app.inject({
      method: 'POST',
      url: `/api/v1/${id}/cancel`,
      headers: { 'x-api-key': team.key },
    });
    expect(expectError(cancel, 400, 'VALIDATION_ERROR').details).toMatchObject({
      reason: 'NOT_CANCELLABLE',
      status: 'processed',
    });
    expect((await logOf(team, id)).status).toBe('queued');

    // Nor once the completed job's row is deleted (pg-boss keeps it 24 h): cancel reported such a
    // delivered email cancelled (review finding, session 15).
    await ctx.app.ctx.database.db.execute(sql`delete from pgboss.job where id = ${uuidOfJobId(jobId)}::uuid`);
    const afterPurge = await ctx.app.inject({
      method: 'POST',
      url: `/api/v1/${id}/cancel`,
      headers: { 'x-api-key': team.key },
    });
    expect(expectError(afterPurge, 400, 'VALIDATION_ERROR').details).toMatchObject({
      reason: 'NOT_CANCELLABLE',
      status: 'processed',
    });
    expect((await logOf(team, id)).status).toBe('queued');
  });
});

function inAnHour(): string {
  return new Date(Date.now() + 3_600_000).toISOString();
}
