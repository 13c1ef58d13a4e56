import { sql } from 'drizzle-orm';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestContext, type TestContext, waitFor } from './helpers/app.ts';
import type { TeamOwner } from './helpers/auth.ts';
import { dashboardCall, dataOf, send } from './helpers/factories.ts';
import { createTeamWithKey } from './helpers/sending-team.ts';
import { startTestSmtpServer, type TestSmtpServer } from './helpers/smtp-server.ts';
import { startWebhookReceiver, type WebhookReceiver } from './helpers/webhook-receiver.ts';

/**
 * A team's webhooks together take at most half a worker's delivery slots and claimed rows, like one
 * webhook (review finding, session 15: two webhooks of one team whose receiver hangs held every
 * slot and every claimed row until their whole backlog had timed out; another team's delivery
 * waited 15.8 s with 32 rows, about an hour with the defaults and 24,000).
 */
describe('webhook delivery slots across teams', () => {
  let ctx: TestContext;
  let smtp: TestSmtpServer;
  let receiver: WebhookReceiver;

  beforeAll(async () => {
    ctx = await createTestContext('postgres', {
      WEBHOOKS_ALLOW_PRIVATE: 'true',
      WORKER_CONCURRENCY: '4',
      WEBHOOK_TIMEOUT_SECONDS: '1',
      WEBHOOK_RETRY_SCHEDULE: '3600',
    });
    smtp = await startTestSmtpServer();
    receiver = await startWebhookReceiver();
    await ctx.startWorkers();
  });
  afterAll(async () => {
    await ctx?.close();
    await smtp?.close();
    await receiver?.close();
  });

  /** A webhook of `owner`'s team on the receiver's `path`, for email.sent. */
  const subscribe = async (owner: TeamOwner, path: string): Promise<{ id: string }> =>
    dataOf(
      await dashboardCall(ctx.app, owner, 'POST', '/api/webhooks', {
        name: `hook ${path}`,
        url: receiver.url(path),
        events: ['email.sent'],
      }),
      201,
    );

  it("delivers another team's event while one team's two webhooks time out on a backlog", async () => {
    const slow = await createTeamWithKey(ctx.app, { smtpPort: smtp.port });
    const fast = await createTeamWithKey(ctx.app, { smtpPort: smtp.port });
    receiver.answer('/hang', () => ({ delayMs: 5_000 }));
    await subscribe(slow.owner, '/hang');
    await subscribe(slow.owner, '/hang');
    await subscribe(fast.owner, '/fast');
    for (let i = 0; i < 16; i++) {
      const response = await send(ctx.app, slow.key, {
        templateId: slow.templateId,
        to: `slow${i}@example.test`,
      });
      expect(response.statusCode).toBe(202);
    }
    await waitFor(async () => (receiver.to('/hang').length >= 2 ? true : undefined), 20_000);
    const started = Date.now();
    expect(
      (await send(ctx.app, fast.key, { templateId: fast.templateId, to: 'fast@example.test' })).statusCode,
    ).toBe(202);
    await waitFor(async () => (receiver.to('/fast').length === 1 ? true : undefined), 20_000);
    // Its email is sent and its event delivered within a few of the slow attempts' 1 s timeouts,
    // not after the slow team's 32 attempts (16 s with 4 slots).
    expect(Date.now() - started).toBeLessThan(6_000);
  });

  it("delivers a third team's event while two teams' receivers hang on a backlog", async () => {
    // Each team may have half the slots (2 of 4): two slow teams took all 4 until their backlogs had
    // timed out (40 attempts of 1 s each, 2 at once). Now each has its fair share.
    const slow = [
      await createTeamWithKey(ctx.app, { smtpPort: smtp.port }),
      await createTeamWithKey(ctx.app, { smtpPort: smtp.port }),
    ];
    const fast = await createTeamWithKey(ctx.app, { smtpPort: smtp.port });
    receiver.answer('/hang-a', () => ({ delayMs: 5_000 }));
    receiver.answer('/hang-b', () => ({ delayMs: 5_000 }));
    await subscribe(slow[0]!.owner, '/hang-a');
    await subscribe(slow[1]!.owner, '/hang-b');
    await subscribe(fast.owner, '/fast-3');
    for (let i = 0; i < 40; i++) {
      for (const team of slow) {
        const response = await send(ctx.app, team.key, {
          templateId: team.templateId,
          to: `s${i}@example.test`,
        });
        expect(response.statusCode).toBe(202);
      }
    }
    await waitFor(
      async () =>
        receiver.to('/hang-a').length >= 1 && receiver.to('/hang-b').length >= 1 ? true : undefined,
      20_000,
    );
    const started = Date.now();
    expect(
      (await send(ctx.app, fast.key, { templateId: fast.templateId, to: 'fast3@example.test' })).statusCode,
    ).toBe(202);
    await waitFor(async () => (receiver.to('/fast-3').length === 1 ? true : undefined), 60_000);
    expect(Date.now() - started).toBeLessThan(5_000);
  });

  it('sends no waiting row of a webhook that answered 410 Gone (only the requests already out)', async () => {
    // Review finding, session 15: the rows a worker held for the webhook were all still sent, as
    // their claim saw the webhook active, until the 410's recording disabled it.
    const team = await createTeamWithKey(ctx.app, { smtpPort: smtp.port });
    receiver.answer('/gone', () => ({ status: 410, delayMs: 300 }));
    const hook = await subscribe(team.owner, '/gone');
    for (let i = 0; i < 12; i++) {
      expect(
        (await send(ctx.app, team.key, { templateId: team.templateId, to: `g${i}@example.test` })).statusCode,
      ).toBe(202);
    }
    await waitFor(async () => {
      const webhook = await dataOf(
        await dashboardCall(ctx.app, team.owner, 'GET', `/api/webhooks/${hook.id}`),
      );
      return webhook.isActive ? undefined : true;
    }, 20_000);
    await new Promise((resolve) => setTimeout(resolve, 1_500));
    // WORKER_CONCURRENCY=4: at most 2 requests to one webhook at once, all made before any answer.
    expect(receiver.to('/gone').length).toBeLessThanOrEqual(2);
  });

  it('keeps sending a webhook whose 410 could not be recorded (it was not disabled)', async () => {
    // Review finding, session 15: the process marked the webhook gone before the 410 was recorded;
    // when the recording failed, every later row of the still-active webhook was dropped unsent.
    const team = await createTeamWithKey(ctx.app, { smtpPort: smtp.port });
    receiver.answer('/gone-once', (nth) => (nth === 1 ? { status: 410 } : { status: 200 }));
    const hook = await subscribe(team.owner, '/gone-once');
    const db = ctx.app.ctx.database.db;
    await db.execute(
      sql.raw(`create or replace function refuse_gone_record() returns trigger language plpgsql
      as $$ begin raise exception 'the 410 record is refused for this test'; end $$`),
    );
    await db.execute(
      sql.raw(`create trigger refuse_gone_record before insert on webhook_deliveries for each row
        when (new.webhook_id = '${hook.id}' and new.response_status = 410) execute function refuse_gone_record()`),
    );
    try {
      await send(ctx.app, team.key, { templateId: team.templateId, to: 'first@example.test' });
      await waitFor(async () => (receiver.to('/gone-once').length === 1 ? true : undefined), 20_000);
      await new Promise((resolve) => setTimeout(resolve, 500));
      await send(ctx.app, team.key, { templateId: team.templateId, to: 'second@example.test' });
      await waitFor(
        async () => (receiver.to('/gone-once').length >= 2 ? true : undefined),
        20_000,
        'the next event',
      );
    } finally {
      await db.execute(sql.raw('drop trigger refuse_gone_record on webhook_deliveries'));
    }
  });
});
