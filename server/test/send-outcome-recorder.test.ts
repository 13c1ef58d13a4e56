import { eq, inArray, sql } from 'drizzle-orm';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { emailLogs } from '../src/db/schema/index.ts';
import { EMAIL_SEND_JOB } from '../src/jobs/definitions.ts';
import type { ClaimedJob } from '../src/jobs/queue.ts';
import { SendOutcomeRecorder } from '../src/modules/emails/send-outcome-recorder.ts';
import { createTestContext, type TestContext, waitFor } from './helpers/app.ts';
import { send } from './helpers/factories.ts';
import { queriesDuring, statementsDuring } from './helpers/pool-statements.ts';
import { createTeamWithKey } from './helpers/sending-team.ts';

/**
 * The worker's group commit of outcomes (issue #9) on real PostgreSQL: a transaction that is slow
 * to commit does not hold back the outcomes that arrive after it.
 */
describe('SendOutcomeRecorder', () => {
  let ctx: TestContext;

  /** email.send jobs claimed by this test's claim loop (held until recorded), by email id. */
  const claimed = new Map<string, ClaimedJob<{ emailId: string }>>();

  beforeAll(async () => {
    ctx = await createTestContext('postgres');
    // A claim loop over email.send whose handler only hands the claimed jobs to the test: the
    // recorder settles them (their promises never resolve; stop() fails nothing already completed).
    await ctx.queue.consume<{ emailId: string }>(
      EMAIL_SEND_JOB,
      { maxInFlight: 100, batchSize: 100, pollingIntervalMs: 50 },
      (jobs) =>
        jobs.map((job) => {
          claimed.set(job.data.emailId, job);
          return new Promise<undefined>(() => {});
        }),
    );
  });
  afterAll(() => ctx?.close());

  /** Queues `count` emails of a new team; returns the team and the emails' ids once claimed. */
  async function claimedEmails(count: number) {
    const team = await createTeamWithKey(ctx.app, { template: { name: 'Recorder' } });
    const ids: string[] = [];
    for (let i = 0; i < count; i++) {
      const response = await send(ctx.app, team.key, {
        templateId: team.templateId,
        to: `r${i}@example.test`,
      });
      expect(response.statusCode, response.body).toBe(202);
      ids.push(response.json().data.id);
    }
    await waitFor(async () => ids.every((id) => claimed.has(id)) || undefined);
    return { team, ids };
  }
  const jobStates = async (ids: readonly string[]) =>
    (
      (await ctx.app.ctx.database.db.execute(
        sql`select state from pgboss.job where name = ${EMAIL_SEND_JOB} and data->>'emailId' = any(${sql.param([...ids])}::text[])`,
      )) as unknown as { rows: { state: string }[] }
    ).rows.map((row) => row.state);
  /** The events of the webhook deliveries queued (outbox rows) for the webhooks of team `teamId`. */
  const webhookDeliveriesOf = async (teamId: string) =>
    (
      (await ctx.app.ctx.database.db.execute(
        sql`select event from webhook_outbox
          where webhook_id in (select id from webhooks where team_id = ${teamId}) order by id`,
      )) as unknown as { rows: { event: string }[] }
    ).rows.map((row) => row.event);

  it('records a group of final outcomes and completes its jobs in ONE statement when no webhook listens', async () => {
    // Issue #9: one round trip (history, status, job completion) instead of begin, status +
    // history, the webhook lookup, complete and commit.
    const { team, ids } = await claimedEmails(3);
    const recorder = new SendOutcomeRecorder(ctx.app.ctx.database.db);
    const statements = await statementsDuring(pg.Client.prototype, () =>
      Promise.all(
        ids.map((id) => recorder.record({ id, teamId: team.owner.teamId }, sent(id), claimed.get(id))),
      ),
    );
    expect(statements.filter((text) => /^\s*(begin|commit)/i.test(text))).toEqual([]);
    // The process's own queue may poll pg-boss meanwhile (a fetch touches no email table).
    const recording = statements.filter((text) => /email_(logs|events)/.test(text));
    expect(recording, recording.join('\n---\n')).toHaveLength(1);
    expect(recording[0]).toContain('insert into "email_events"');
    expect(recording[0]).toContain('pgboss.');
    const rows = await ctx.app.ctx.database.db
      .select({ status: emailLogs.status, providerMessageId: emailLogs.providerMessageId })
      .from(emailLogs)
      .where(inArray(emailLogs.id, ids));
    expect(rows.map((row) => row.status)).toEqual(['sent', 'sent', 'sent']);
    expect(await jobStates(ids)).toEqual(['completed', 'completed', 'completed']);
  });

  it('sends that one statement as a named statement, the same one for every group (parsed and planned once per connection)', async () => {
    // Session 21: PostgreSQL parsed and planned the statement (a few kB of SQL) on every group.
    const recorder = new SendOutcomeRecorder(ctx.app.ctx.database.db);
    const names: (string | undefined)[] = [];
    for (const size of [2, 3]) {
      const { team, ids } = await claimedEmails(size);
      const queries = await queriesDuring(pg.Client.prototype, () =>
        Promise.all(
          ids.map((id) => recorder.record({ id, teamId: team.owner.teamId }, sent(id), claimed.get(id))),
        ),
      );
      const recording = queries.filter((query) => /email_(logs|events)/.test(query.text));
      expect(recording).toHaveLength(1);
      names.push(recording[0]!.name);
      expect(await jobStates(ids)).toEqual(ids.map(() => 'completed'));
    }
    expect(names[0]).toMatch(/^pw_[0-9a-f]{32}$/);
    expect(names[1]).toBe(names[0]);
  });

  it('one statement: a late sent (the email already delivered) keeps the status and fills sentAt', async () => {
    const { team, ids } = await claimedEmails(1);
    const [id] = ids as [string];
    // A provider's delivery event got there first (README "Delivery events": a status never moves back).
    await ctx.app.ctx.database.db.execute(
      sql`update email_logs set status = 'delivered', delivered_at = now() where id = ${id}`,
    );
    const recorder = new SendOutcomeRecorder(ctx.app.ctx.database.db);
    const statements = await statementsDuring(pg.Client.prototype, () =>
      recorder.record({ id, teamId: team.owner.teamId }, sent(id), claimed.get(id)),
    );
    expect(statements.filter((text) => /^\s*begin/i.test(text))).toEqual([]);
    const [row] = await ctx.app.ctx.database.db
      .select({ status: emailLogs.status, sentAt: emailLogs.sentAt })
      .from(emailLogs)
      .where(eq(emailLogs.id, id));
    expect(row?.status).toBe('delivered');
    expect(row?.sentAt).toBeInstanceOf(Date);
    const events = (await ctx.app.ctx.database.db.execute(
      sql`select count(*)::int as n from email_events where email_id = ${id} and status = 'sent'`,
    )) as unknown as { rows: { n: number }[] };
    expect(events.rows[0]?.n).toBe(1);
    expect(await jobStates(ids)).toEqual(['completed']);
  });

  it('records in a transaction with the webhook outbox when a webhook of the team is subscribed', async () => {
    const { team, ids } = await claimedEmails(2);
    // Subscribed after the emails were queued, so only `email.sent` can reach it.
    await ctx.app.ctx.database.db.execute(sql`insert into webhooks (id, team_id, name, url, events, secret)
      values (${`wh_recorder_${Date.now()}`}, ${team.owner.teamId}, 'Recorder', 'https://example.test/hook',
        array['email.sent'], 'not used')`);
    const recorder = new SendOutcomeRecorder(ctx.app.ctx.database.db);
    const statements = await statementsDuring(pg.Client.prototype, () =>
      Promise.all(
        ids.map((id) => recorder.record({ id, teamId: team.owner.teamId }, sent(id), claimed.get(id))),
      ),
    );
    expect(statements.some((text) => /^\s*begin/i.test(text))).toBe(true);
    expect(await webhookDeliveriesOf(team.owner.teamId)).toEqual(['email.sent', 'email.sent']);
    expect(await jobStates(ids)).toEqual(['completed', 'completed']);
    const events = (await ctx.app.ctx.database.db.execute(
      sql`select count(*)::int as n from email_events where email_id = any(${sql.param(ids)}::text[]) and status = 'sent'`,
    )) as unknown as { rows: { n: number }[] };
    // The one-statement attempt wrote nothing: one history row per email, not two.
    expect(events.rows[0]?.n).toBe(2);
  });

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
