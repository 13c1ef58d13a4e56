import { eq } from 'drizzle-orm';
import type pg from 'pg';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { emailLogs, webhookOutbox } from '../src/db/schema/index.ts';
import { createTestContext, type TestContext, waitFor } from './helpers/app.ts';
import type { TeamOwner } from './helpers/auth.ts';
import { dashboardCall, dataOf, send } from './helpers/factories.ts';
import { createTeamWithKey } from './helpers/sending-team.ts';
import { startTestSmtpServer, type TestSmtpServer } from './helpers/smtp-server.ts';

/**
 * A webhook deleted while a status change that fans out to it is being written (review finding,
 * session 18): the fan-out read the team's webhooks, the delete committed, and the outbox insert
 * failed on its foreign key, taking the status change with it. The delete is held open here in a
 * transaction of its own (as a delete cascading a large backlog stays open for a while) and
 * committed while the status change waits.
 */
describe('a webhook deleted while a status change fans out to it', () => {
  let ctx: TestContext;
  let smtp: TestSmtpServer;
  let owner: TeamOwner;
  let apiKey: string;
  let templateId: string;

  beforeAll(async () => {
    ctx = await createTestContext('postgres');
    smtp = await startTestSmtpServer();
    await ctx.startWorkers();
  });
  beforeEach(async () => {
    ({ owner, key: apiKey, templateId } = await createTeamWithKey(ctx.app, { smtpPort: smtp.port }));
  });
  afterAll(async () => {
    await ctx?.close();
    await smtp?.close();
  });

  const db = () => ctx.context.database.db;

  async function createWebhook(events: string[]): Promise<string> {
    const created = await dataOf(
      await dashboardCall(ctx.app, owner, 'POST', '/api/webhooks', {
        name: 'Doomed',
        url: 'https://receiver.example/hook',
        events,
      }),
      201,
    );
    return created.id;
  }

  /** Deletes the webhook in a transaction left open; `commit()` ends it. */
  async function openDelete(webhookId: string): Promise<{ commit(): Promise<void> }> {
    const client: pg.PoolClient = await ctx.context.database.pool.connect();
    await client.query('begin');
    const deleted = await client.query('delete from webhooks where id = $1', [webhookId]);
    expect(deleted.rowCount).toBe(1);
    return {
      async commit() {
        await client.query('commit');
        client.release();
      },
    };
  }

  const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

  it('accepts a send whose email.queued fans out to it (was 500 INTERNAL_ERROR)', async () => {
    const webhookId = await createWebhook(['email.queued']);
    const deletion = await openDelete(webhookId);
    // Started now (light-my-request starts a request when it is awaited or `then`ed).
    const response = send(ctx.app, apiKey, { templateId, to: 'race@example.test' }).then((r) => r);
    await sleep(300);
    await deletion.commit();
    const answer = await response;
    expect(answer.statusCode, answer.body).toBe(202);
    const emailId = answer.json().data.id;
    const [log] = await db().select().from(emailLogs).where(eq(emailLogs.id, emailId));
    expect(log?.status).toBe('queued');
    expect(await db().select().from(webhookOutbox).where(eq(webhookOutbox.webhookId, webhookId))).toEqual([]);
  });

  it('records `sent` for an email delivered while the webhook of its email.sent was being deleted (stayed queued)', async () => {
    const webhookId = await createWebhook(['email.sent']);
    const deletion = await openDelete(webhookId);
    const toRace = () =>
      smtp.messages.filter((message) => message.envelopeTo.includes('race-sent@example.test'));
    const response = await send(ctx.app, apiKey, { templateId, to: 'race-sent@example.test' });
    expect(response.statusCode, response.body).toBe(202);
    const emailId = response.json().data.id;
    await waitFor(async () => (toRace().length > 0 ? true : undefined), 10_000, 'the delivery');
    // The worker now records `sent`, which waits for the delete's lock.
    await sleep(300);
    await deletion.commit();
    const status = await waitFor(
      async () => {
        const [log] = await db().select().from(emailLogs).where(eq(emailLogs.id, emailId));
        return log?.status === 'queued' ? undefined : log?.status;
      },
      10_000,
      'the email to leave queued',
    );
    expect(status).toBe('sent');
    expect(toRace()).toHaveLength(1);
  });
});
