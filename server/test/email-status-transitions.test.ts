import { eq, sql } from 'drizzle-orm';
import pg from 'pg';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { emailEvents, emailLogs } from '../src/db/schema/index.ts';
import { emailRepository } from '../src/modules/emails/emails.repository.ts';
import { transition, transitionMany } from '../src/modules/emails/emails.status.service.ts';
import { createTestContext, type TestContext } from './helpers/app.ts';
import { setupOwner, type TeamOwner } from './helpers/auth.ts';
import { buildApiKey, buildSmtpAdapter, buildTemplate, send } from './helpers/factories.ts';
import { queriesDuring } from './helpers/pool-statements.ts';
import { closedPort } from './helpers/smtp-server.ts';

/** The one status writer (transition / transitionMany) against real PostgreSQL. */
describe('email status transitions', () => {
  let ctx: TestContext;
  let owner: TeamOwner;
  let key: string;
  let templateId: string;

  beforeAll(async () => {
    ctx = await createTestContext('postgres');
  });
  // Every case gets a team of its own (CONVENTIONS.md); the app and database are the file's.
  beforeEach(async () => {
    owner = await setupOwner(ctx.app);
    key = (await buildApiKey(ctx.app, owner)).key;
    await buildSmtpAdapter(ctx.app, owner, await closedPort());
    templateId = (await buildTemplate(ctx.app, owner, { name: 'Transitions' })).id;
  });
  afterAll(() => ctx?.close());

  const db = () => ctx.app.ctx.database.db;
  /** A new queued email of the team (no worker runs in this file). */
  async function queuedEmail(): Promise<{ id: string; teamId: string }> {
    const response = await send(ctx.app, key, { templateId, to: 'someone@example.test' });
    expect(response.statusCode, response.body).toBe(202);
    return { id: response.json().data.id, teamId: owner.teamId };
  }
  const logOf = async (id: string) => (await emailRepository.findLog(db(), owner.teamId, id))!;
  const historyOf = async (id: string) =>
    (await emailRepository.events(db(), owner.teamId, id)).map((event) => event.status);
  const at = (seconds: number) => new Date(Date.UTC(2030, 0, 1, 0, 0, seconds));

  it('moves many emails in one call, with their timestamps, fields and history', async () => {
    const emails = await Promise.all([queuedEmail(), queuedEmail(), queuedEmail()]);
    const results = await db().transaction((tx) =>
      transitionMany(
        tx,
        emails.map((email, i) => ({
          email,
          event: {
            status: 'sent' as const,
            at: at(i),
            set: { providerMessageId: `pm-${i}`, attemptCount: 1 },
          },
        })),
      ),
    );
    expect(results.map((row) => row?.status)).toEqual(['sent', 'sent', 'sent']);
    for (const [i, email] of emails.entries()) {
      const log = await logOf(email.id);
      expect(log).toMatchObject({
        status: 'sent',
        providerMessageId: `pm-${i}`,
        attemptCount: 1,
        sentAt: at(i),
      });
      expect(await historyOf(email.id)).toEqual(['queued', 'sent']);
    }
  });

  it('never moves backwards: a late delivered after opened keeps opened but sets deliveredAt once', async () => {
    const email = await queuedEmail();
    await transition(db(), email, { status: 'sent', at: at(1) });
    await transition(db(), email, { status: 'opened', at: at(3) });
    const late = await transition(db(), email, { status: 'delivered', at: at(2) });
    expect(late).toBeUndefined();
    const log = await logOf(email.id);
    expect(log).toMatchObject({ status: 'opened', openedAt: at(3), deliveredAt: at(2) });
    expect(await historyOf(email.id)).toEqual(['queued', 'sent', 'delivered', 'opened']);
    // Once set, a repeated late delivered leaves it alone; a late step after an end (bounced) sets nothing.
    await transition(db(), email, { status: 'delivered', at: at(4) });
    expect((await logOf(email.id)).deliveredAt).toEqual(at(2));
    const bounced = await queuedEmail();
    await transition(db(), bounced, { status: 'sent', at: at(1) });
    await transition(db(), bounced, { status: 'bounced', at: at(2) });
    await transition(db(), bounced, { status: 'delivered', at: at(3) });
    expect(await logOf(bounced.id)).toMatchObject({ status: 'bounced', deliveredAt: null });
  });

  it('sets each timestamp once, even when the same status is reported again', async () => {
    const email = await queuedEmail();
    await transition(db(), email, { status: 'sent', at: at(1) });
    await transition(db(), email, { status: 'delivered', at: at(2) });
    expect(await transition(db(), email, { status: 'delivered', at: at(5) })).toBeUndefined();
    expect((await logOf(email.id)).deliveredAt).toEqual(at(2));
    expect(await historyOf(email.id)).toEqual(['queued', 'sent', 'delivered', 'delivered']);
  });

  it('checks the state machine against the status in the database, not the caller’s view', async () => {
    const email = await queuedEmail();
    await transition(db(), email, { status: 'sent', at: at(1) });
    await transition(db(), email, { status: 'delivered', at: at(2) });
    // A writer that still believes the email is `sent` reports a failure: failed is not allowed
    // after delivered, so nothing moves.
    expect(
      await transition(db(), { ...email }, { status: 'failed', set: { errorMessage: 'x' } }),
    ).toBeUndefined();
    expect(await logOf(email.id)).toMatchObject({ status: 'delivered', failedAt: null, errorMessage: null });
  });

  it('applies several events for one email in one call in order', async () => {
    const email = await queuedEmail();
    const results = await transitionMany(db(), [
      { email, event: { status: 'sent', at: at(1) } },
      { email, event: { status: 'delivered', at: at(2) } },
      { email, event: { status: 'opened', at: at(3) } },
    ]);
    expect(results.map((row) => row?.status)).toEqual(['sent', 'delivered', 'opened']);
    expect(await logOf(email.id)).toMatchObject({
      status: 'opened',
      sentAt: at(1),
      deliveredAt: at(2),
      openedAt: at(3),
    });
  });

  it("writes nothing for an email named under another team's id", async () => {
    const email = await queuedEmail();
    const stranger = await setupOwner(ctx.app);
    const result = await transition(db(), { id: email.id, teamId: stranger.teamId }, { status: 'sent' });
    expect(result).toBeUndefined();
    expect((await logOf(email.id)).status).toBe('queued');
    // Under any team: no history row was attached to this email.
    const rows = await db().select().from(emailEvents).where(eq(emailEvents.emailId, email.id));
    expect(rows.map((row) => [row.teamId, row.status])).toEqual([[owner.teamId, 'queued']]);
  });

  it('records a group in ONE statement that finds each email by its primary key, not by a scan', async () => {
    const emails = await Promise.all([queuedEmail(), queuedEmail(), queuedEmail()]);
    // A table of a few thousand logs, as a worker's backlog makes it: the statement the worker
    // sends per group of outcomes once took a hash join over a sequential scan of it (PostgreSQL
    // estimates jsonb_to_recordset at 100 rows), 6-8 ms per group and growing with the table.
    const columns = (
      (await db().execute(sql`select column_name from information_schema.columns
        where table_name = 'email_logs' and column_name <> 'id' order by ordinal_position`)) as unknown as {
        rows: { column_name: string }[];
      }
    ).rows.map((row) => sql.identifier(row.column_name));
    const list = sql.join(columns, sql`, `);
    await db().execute(sql`insert into email_logs (id, ${list})
      select 'filler_' || g || '_' || ${emails[0]!.id}, ${list} from email_logs, generate_series(1, 3000) g
      where email_logs.id = ${emails[0]!.id}`);
    await db().execute(sql`analyze email_logs`);

    const sent = await queriesDuring(pg.Client.prototype, async () => {
      await db().transaction((tx) =>
        transitionMany(
          tx,
          emails.map((email) => ({ email, event: { status: 'sent' as const, at: at(1) } })),
        ),
      );
    });
    // History rows and status moves together (the webhook outbox's lookup follows on its own).
    const statements = sent.filter((s) => /email_logs|email_events/.test(s.text));
    expect(statements).toHaveLength(1);
    for (const email of emails) expect(await historyOf(email.id)).toEqual(['queued', 'sent']);

    const client = await ctx.app.ctx.database.pool.connect();
    try {
      const plan = await client.query({
        text: `explain ${statements[0]!.text}`,
        values: statements[0]!.values,
      });
      const lines = plan.rows.map((row: Record<string, string>) => row['QUERY PLAN']).join('\n');
      expect(lines).not.toMatch(/Seq Scan on email_logs/);
    } finally {
      client.release();
    }
  });

  it('refuses a status outside the state machine at the database', async () => {
    const email = await queuedEmail();
    const error = await db()
      .update(emailLogs)
      .set({ status: sql`'archived'` as never })
      .where(eq(emailLogs.id, email.id))
      .then(
        () => undefined,
        (e: unknown) => e as { cause?: { code?: string } },
      );
    expect(error?.cause?.code ?? (error as { code?: string } | undefined)?.code).toBe('22P02');
  });
});
