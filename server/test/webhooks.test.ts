import { and, eq, sql } from 'drizzle-orm';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { emailLogs, webhooks } from '../src/db/schema/index.ts';
import { transition } from '../src/modules/emails/emails.status.service.ts';
import { writeAttempts } from '../src/modules/webhooks/webhook-recorder.ts';
import { PREVIOUS_SECRETS_KEPT } from '../src/modules/webhooks/webhooks.repository.ts';
import { WEBHOOKS_PER_TEAM } from '../src/modules/webhooks/webhooks.service.ts';
import { createTestContext, type TestContext, waitFor } from './helpers/app.ts';
import { setupOwner, type TeamOwner } from './helpers/auth.ts';
import { dashboardCall, dataOf, expectError, send } from './helpers/factories.ts';
import { createTeamWithKey } from './helpers/sending-team.ts';
import { startTestSmtpServer, type TestSmtpServer } from './helpers/smtp-server.ts';
import { startWebhookReceiver, verifyWebhook, type WebhookReceiver } from './helpers/webhook-receiver.ts';

const ALL_EVENTS = [
  'email.queued',
  'email.sent',
  'email.delivered',
  'email.opened',
  'email.clicked',
  'email.bounced',
  'email.failed',
  'email.spam',
];

describe('outbound webhooks (issue #11)', () => {
  let ctx: TestContext;
  let smtp: TestSmtpServer;
  let receiver: WebhookReceiver;
  let owner: TeamOwner;
  let apiKey: string;
  let templateId: string;
  let pathCount = 0;

  beforeAll(async () => {
    ctx = await createTestContext('postgres', {
      // The receiver listens on 127.0.0.1.
      WEBHOOKS_ALLOW_PRIVATE: 'true',
      WEBHOOK_RETRY_SCHEDULE: '1,1,1',
      WEBHOOK_TIMEOUT_SECONDS: '2',
    });
    smtp = await startTestSmtpServer();
    receiver = await startWebhookReceiver();
    await ctx.startWorkers();
  });
  // Every case gets a team of its own (CONVENTIONS.md), so its sends reach only its own webhooks,
  // never those an earlier case left subscribed. The app, database, SMTP sink and receiver (one
  // path per webhook) are the file's.
  beforeEach(async () => {
    ({
      owner,
      key: apiKey,
      templateId,
    } = await createTeamWithKey(ctx.app, { smtpPort: smtp.port, template: { name: 'Hooked' } }));
  });
  afterAll(async () => {
    await ctx?.close();
    await smtp?.close();
    await receiver?.close();
  });

  const db = () => ctx.app.ctx.database.db;

  /** Creates a webhook on a fresh receiver path; returns it with its secret and path. */
  async function buildWebhook(events: string[] = ALL_EVENTS, user: TeamOwner = owner) {
    const path = `/hook-${++pathCount}`;
    const created = await dataOf(
      await dashboardCall(ctx.app, user, 'POST', '/api/webhooks', {
        name: `Hook ${pathCount}`,
        url: receiver.url(path),
        events,
      }),
      201,
    );
    return { ...created, path } as { id: string; secret: string; path: string; events: string[] };
  }

  async function deliveriesOf(webhookId: string, query = ''): Promise<any[]> {
    return dataOf(
      await dashboardCall(ctx.app, owner, 'GET', `/api/webhooks/${webhookId}/deliveries${query}`),
    );
  }

  async function webhookOf(webhookId: string): Promise<any> {
    return dataOf(await dashboardCall(ctx.app, owner, 'GET', `/api/webhooks/${webhookId}`));
  }

  async function sendOne(to = 'someone@example.test'): Promise<string> {
    const response = await send(ctx.app, apiKey, { templateId, to, variables: { first_name: 'Ada' } });
    expect(response.statusCode, response.body).toBe(202);
    return response.json().data.id;
  }

  it('creates, reads, updates and deletes webhooks as the spec shapes them; the secret only on create', async () => {
    const create = await dashboardCall(ctx.app, owner, 'POST', '/api/webhooks', {
      name: 'Orders',
      url: receiver.url('/crud'),
      events: ['email.sent', 'email.failed', 'email.sent'],
    });
    const created = await dataOf(create, 201);
    expect(Object.keys(created).sort()).toEqual(
      ['id', 'name', 'url', 'events', 'isActive', 'consecutiveFailures', 'createdAt', 'secret'].sort(),
    );
    expect(created).toMatchObject({ name: 'Orders', events: ['email.sent', 'email.failed'], isActive: true });
    expect(created.id).toMatch(/^whk_/);
    expect(created.secret).toMatch(/^whsec_[A-Za-z0-9+/]+=*$/);
    expect(Buffer.from(created.secret.slice(6), 'base64').length).toBeGreaterThanOrEqual(24);
    // Stored encrypted, not as the secret.
    const [row] = await db().select().from(webhooks).where(eq(webhooks.id, created.id));
    expect(row!.secretEncrypted).not.toContain(created.secret.slice(6));

    const read = await webhookOf(created.id);
    expect(read).toMatchObject({
      id: created.id,
      lastTriggeredAt: null,
      lastSuccessAt: null,
      consecutiveFailures: 0,
    });
    expect(JSON.stringify(read)).not.toContain('whsec_');
    const list = await dataOf(await dashboardCall(ctx.app, owner, 'GET', '/api/webhooks'));
    expect(list.map((w: { id: string }) => w.id)).toContain(created.id);
    expect(JSON.stringify(list)).not.toContain('whsec_');

    const updated = await dataOf(
      await dashboardCall(ctx.app, owner, 'PUT', `/api/webhooks/${created.id}`, {
        name: 'Renamed',
        isActive: false,
      }),
    );
    expect(Object.keys(updated).sort()).toEqual(
      ['id', 'name', 'url', 'events', 'isActive', 'updatedAt'].sort(),
    );
    expect(updated).toMatchObject({ name: 'Renamed', isActive: false });

    expectError(
      await dashboardCall(ctx.app, owner, 'POST', '/api/webhooks', {
        name: 'x',
        url: 'ftp://a.test',
        events: ['email.sent'],
      }),
      400,
      'VALIDATION_ERROR',
    );
    expectError(
      await dashboardCall(ctx.app, owner, 'POST', '/api/webhooks', {
        name: 'x',
        url: receiver.url('/'),
        events: ['email.nope'],
      }),
      400,
      'VALIDATION_ERROR',
    );
    expectError(
      await dashboardCall(ctx.app, owner, 'POST', '/api/webhooks', {
        name: 'x',
        url: receiver.url('/'),
        events: [],
      }),
      400,
      'VALIDATION_ERROR',
    );
    expectError(await dashboardCall(ctx.app, owner, 'GET', '/api/webhooks/whk_unknown'), 404, 'NOT_FOUND');

    expect((await dashboardCall(ctx.app, owner, 'DELETE', `/api/webhooks/${created.id}`)).json()).toEqual({
      success: true,
    });
    expectError(await dashboardCall(ctx.app, owner, 'GET', `/api/webhooks/${created.id}`), 404, 'NOT_FOUND');
  });

  /** The validation issues of creating a webhook with `url` (asserting a 400 VALIDATION_ERROR). */
  async function issuesCreating(url: string): Promise<unknown> {
    const error = expectError(
      await dashboardCall(ctx.app, owner, 'POST', '/api/webhooks', {
        name: 'x',
        url,
        events: ['email.sent'],
      }),
      400,
      'VALIDATION_ERROR',
    );
    return error.details.issues;
  }

  it('refuses a URL with port 0, which no delivery can reach, on create and update', async () => {
    // Review finding, session 22: it was saved, and every delivery then failed to connect.
    for (const url of ['https://hooks.example.test:0/in', 'http://127.0.0.1:00/in']) {
      expect(await issuesCreating(url)).toEqual([{ path: 'body.url', message: 'must not name port 0' }]);
    }
    const webhook = await buildWebhook(['email.sent']);
    const update = expectError(
      await dashboardCall(ctx.app, owner, 'PUT', `/api/webhooks/${webhook.id}`, {
        url: 'https://hooks.example.test:0/',
      }),
      400,
      'VALIDATION_ERROR',
    );
    expect(update.details.issues).toEqual([{ path: 'body.url', message: 'must not name port 0' }]);
    expect((await webhookOf(webhook.id)).url).toBe(receiver.url(webhook.path));
  });

  it('refuses a URL whose host no resolver takes (empty or hyphen-edged labels, a label over 63)', async () => {
    // Review finding, session 22: URL parsing takes these hosts, so they were saved and every
    // delivery failed at DNS.
    for (const url of [
      'https://a..b/in',
      'https://-a.example.test/in',
      `https://${'a'.repeat(64)}.example.test/in`,
    ]) {
      expect(await issuesCreating(url), url).toEqual([
        {
          path: 'body.url',
          message: 'must name a valid host (labels of letters, digits and inner hyphens) or an IP address',
        },
      ]);
    }
    // An internationalised name is taken (URL gives its xn-- form).
    const created = await dashboardCall(ctx.app, owner, 'POST', '/api/webhooks', {
      name: 'idn',
      url: 'https://bücher.example.test/in',
      events: ['email.sent'],
    });
    expect(created.statusCode, created.body).toBe(201);
    await dashboardCall(ctx.app, owner, 'DELETE', `/api/webhooks/${created.json().data.id}`);
  });

  it('a team holds at most WEBHOOKS_PER_TEAM webhooks, also when they are created at once; deleting one makes room', async () => {
    // One status change writes a delivery per matching webhook: unbounded, a team could make
    // every send write thousands of rows on the shared worker (review finding, session 15).
    const creates = await Promise.all(
      Array.from({ length: WEBHOOKS_PER_TEAM + 5 }, (_, i) =>
        dashboardCall(ctx.app, owner, 'POST', '/api/webhooks', {
          name: `Many ${i}`,
          url: receiver.url(`/many-${i}`),
          events: ['email.sent'],
        }),
      ),
    );
    const statuses = creates.map((response) => response.statusCode);
    expect(statuses.filter((status) => status === 201)).toHaveLength(WEBHOOKS_PER_TEAM);
    const refused = creates.filter((response) => response.statusCode !== 201);
    expect(refused).toHaveLength(5);
    for (const response of refused) {
      expectError(response, 409, 'CONFLICT');
      expect(response.json().error.details).toEqual({ limit: WEBHOOKS_PER_TEAM });
    }
    const list = await dataOf(await dashboardCall(ctx.app, owner, 'GET', '/api/webhooks'));
    expect(list).toHaveLength(WEBHOOKS_PER_TEAM);
    // An inactive webhook still counts; another team is not affected.
    await dashboardCall(ctx.app, owner, 'PUT', `/api/webhooks/${list[0].id}`, { isActive: false });
    const more = { name: 'More', url: receiver.url('/more'), events: ['email.sent'] };
    expectError(await dashboardCall(ctx.app, owner, 'POST', '/api/webhooks', more), 409, 'CONFLICT');
    const other = await createTeamWithKey(ctx.app, { smtpPort: smtp.port });
    await dataOf(await dashboardCall(ctx.app, other.owner, 'POST', '/api/webhooks', more), 201);
    expect((await dashboardCall(ctx.app, owner, 'DELETE', `/api/webhooks/${list[0].id}`)).statusCode).toBe(
      200,
    );
    await dataOf(await dashboardCall(ctx.app, owner, 'POST', '/api/webhooks', more), 201);
  });

  it('a send delivers email.queued then email.sent, signed per Standard Webhooks, with the spec payload', async () => {
    const hook = await buildWebhook(['email.queued', 'email.sent']);
    const other = await buildWebhook(['email.failed']); // subscribed to neither
    const emailId = await sendOne('payload@example.test');
    const received = await waitFor(
      async () => (receiver.to(hook.path).length >= 2 ? receiver.to(hook.path) : undefined),
      20_000,
      'two deliveries',
    );
    const events = received.map((r) => verifyWebhook(hook.secret, r) as any);
    expect(events.map((e) => e.event).sort()).toEqual(['email.queued', 'email.sent']);
    const sent = events.find((e) => e.event === 'email.sent');
    expect(sent).toEqual({
      event: 'email.sent',
      timestamp: expect.stringMatching(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/),
      data: {
        emailId,
        templateId,
        to: ['payload@example.test'],
        subject: 'Hi Ada',
        status: 'sent',
      },
    });
    expect(events.find((e) => e.event === 'email.queued')!.data.status).toBe('queued');
    for (const request of received) {
      expect(request.headers['webhook-id']).toMatch(/^msg_/);
      expect(request.headers['webhook-signature']).toMatch(/^v1,[A-Za-z0-9+/]+=*$/);
      expect(request.headers['content-type']).toBe('application/json');
    }
    // A wrong secret does not verify.
    expect(() => verifyWebhook(`whsec_${Buffer.alloc(32, 1).toString('base64')}`, received[0]!)).toThrow();
    expect(receiver.to(other.path)).toEqual([]);

    await waitFor(async () => ((await deliveriesOf(hook.id)).length === 2 ? true : undefined));
    const deliveries = await deliveriesOf(hook.id);
    for (const delivery of deliveries) {
      expect(delivery).toMatchObject({
        webhookId: hook.id,
        success: true,
        responseStatus: 200,
        responseBody: 'ok',
        attemptCount: 1,
      });
      expect(delivery.id).toMatch(/^del_/);
      expect(typeof delivery.durationMs).toBe('number');
    }
    expect(deliveries.map((d: any) => d.event).sort()).toEqual(['email.queued', 'email.sent']);
    const webhook = await webhookOf(hook.id);
    expect(webhook.lastSuccessAt).not.toBeNull();
    expect(webhook.lastTriggeredAt).not.toBeNull();
    expect(webhook.consecutiveFailures).toBe(0);
  });

  it("carries the send's metadata and tags in every event's data, and leaves them out when it had none", async () => {
    const hook = await buildWebhook(['email.queued', 'email.sent']);
    const response = await send(ctx.app, apiKey, {
      templateId,
      to: 'tagged@example.test',
      variables: { first_name: 'Ada' },
      metadata: { orderId: '42', customer: 'c_7' },
      tags: { campaign: 'welcome' },
    });
    expect(response.statusCode, response.body).toBe(202);
    const plainId = await sendOne('plain@example.test');
    const received = await waitFor(
      async () => (receiver.to(hook.path).length >= 4 ? receiver.to(hook.path) : undefined),
      20_000,
      'four deliveries',
    );
    const events = received.map((r) => verifyWebhook(hook.secret, r) as any);
    const tagged = events.filter((e) => e.data.emailId === response.json().data.id);
    expect(tagged.map((e) => e.event).sort()).toEqual(['email.queued', 'email.sent']);
    for (const event of tagged) {
      expect(event.data.metadata).toEqual({ orderId: '42', customer: 'c_7' });
      expect(event.data.tags).toEqual({ campaign: 'welcome' });
    }
    const plain = events.filter((e) => e.data.emailId === plainId);
    expect(plain).toHaveLength(2);
    for (const event of plain)
      expect(Object.keys(event.data)).not.toEqual(expect.arrayContaining(['metadata']));
    for (const event of plain) expect(event.data).not.toHaveProperty('tags');

    // Tags given as a list of labels (issue #10's string list) travel as that list.
    const labelled = await send(ctx.app, apiKey, {
      templateId,
      to: 'labelled@example.test',
      variables: { first_name: 'Ada' },
      tags: ['welcome', 'onboarding'],
    });
    expect(labelled.statusCode, labelled.body).toBe(202);
    const labelledEvents = await waitFor(
      async () => {
        const found = receiver
          .to(hook.path)
          .map((r) => verifyWebhook(hook.secret, r) as any)
          .filter((e) => e.data.emailId === labelled.json().data.id);
        return found.length >= 2 ? found : undefined;
      },
      20_000,
      'two deliveries of the labelled email',
    );
    for (const event of labelledEvents) expect(event.data.tags).toEqual(['welcome', 'onboarding']);
  });

  it('retries a failing receiver on the schedule with the same webhook-id until it answers 2xx', async () => {
    const hook = await buildWebhook(['email.sent']);
    receiver.answer(hook.path, (nth) =>
      nth <= 2 ? { status: 500, body: `fail ${nth}` } : { status: 204, body: '' },
    );
    await sendOne('retry@example.test');
    const received = await waitFor(
      async () => (receiver.to(hook.path).length >= 3 ? receiver.to(hook.path) : undefined),
      30_000,
      'three attempts',
    );
    expect(new Set(received.map((r) => r.headers['webhook-id'])).size).toBe(1);
    // WEBHOOK_RETRY_SCHEDULE=1,1,1: each retry waits its second.
    expect(received[1]!.receivedAt - received[0]!.receivedAt).toBeGreaterThanOrEqual(900);
    expect(received[2]!.receivedAt - received[1]!.receivedAt).toBeGreaterThanOrEqual(900);
    for (const request of received) verifyWebhook(hook.secret, request);
    await waitFor(async () => ((await deliveriesOf(hook.id)).length === 3 ? true : undefined));
    const deliveries = await deliveriesOf(hook.id);
    expect(deliveries.map((d: any) => [d.attemptCount, d.success, d.responseStatus, d.responseBody])).toEqual(
      [
        [3, true, 204, ''],
        [2, false, 500, 'fail 2'],
        [1, false, 500, 'fail 1'],
      ],
    );
    expect(new Set(deliveries.map((d: any) => d.messageId))).toEqual(
      new Set([received[0]!.headers['webhook-id']]),
    );
    expect((await deliveriesOf(hook.id, '?success=false')).map((d: any) => d.attemptCount)).toEqual([2, 1]);
    expect((await deliveriesOf(hook.id, '?success=true&limit=1')).map((d: any) => d.attemptCount)).toEqual([
      3,
    ]);
    expectError(
      await dashboardCall(ctx.app, owner, 'GET', `/api/webhooks/${hook.id}/deliveries?limit=1001`),
      400,
      'VALIDATION_ERROR',
    );
    const webhook = await webhookOf(hook.id);
    expect(webhook.consecutiveFailures).toBe(0);
    expect(webhook.isActive).toBe(true);
    await new Promise((resolve) => setTimeout(resolve, 1500));
    expect(receiver.to(hook.path)).toHaveLength(3); // nothing after the success
  });

  it('records a failed attempt and reschedules its outbox row as the next attempt in one transaction', async () => {
    const hook = await buildWebhook(['email.sent']);
    receiver.answer(hook.path, (nth) =>
      nth === 1 ? { status: 500, body: 'no' } : { status: 200, body: 'ok' },
    );
    await sendOne('one-commit@example.test');
    // xmin = the transaction that wrote a row's current version: between the two attempts
    // (WEBHOOK_RETRY_SCHEDULE=1: a second), the first attempt's record and its outbox row, now
    // attempt 2 with no lease, carry the same one.
    const [between] = await waitFor(async () => {
      const { rows } = (await db().execute(sql`
          select d.xmin::text as record_tx, o.xmin::text as row_tx, o.attempt, o.leased_until
          from webhook_deliveries d join webhook_outbox o on o.message_id = d.message_id
          where d.webhook_id = ${hook.id} and d.attempt_count = 1`)) as unknown as {
        rows: { record_tx: string; row_tx: string; attempt: number; leased_until: Date | null }[];
      };
      return rows.length > 0 && rows[0]!.attempt === 2 ? rows : undefined;
    }, 20_000);
    expect(between).toMatchObject({ attempt: 2, leased_until: null });
    expect(between!.row_tx).toBe(between!.record_tx);
    // The second attempt succeeds: its record is written and its row leaves, together.
    await waitFor(async () => ((await deliveriesOf(hook.id)).length === 2 ? true : undefined), 20_000);
    await waitFor(async () => {
      const { rows } = (await db().execute(
        sql`select count(*)::int as n from webhook_outbox where webhook_id = ${hook.id}`,
      )) as unknown as { rows: { n: number }[] };
      return rows[0]!.n === 0 ? true : undefined;
    });
  });

  it('numbers a redelivery and the scheduled retry after it apart (every record its own attemptCount)', async () => {
    // Review finding, session 15: redeliver took the highest recorded number + 1 and left the
    // retry's outbox row as it was: both were recorded as attempt 2.
    const hook = await buildWebhook(['email.sent']);
    receiver.answer(hook.path, (nth) => (nth === 1 ? { status: 500 } : { status: 200 }));
    await sendOne('numbered@example.test');
    // Hold the scheduled retry (attempt 2) back while the redelivery is made.
    await waitFor(async () => {
      const { rows } = (await db().execute(sql`update webhook_outbox set due_at = now() + interval '1 hour'
          where webhook_id = ${hook.id} and attempt = 2 and leased_until is null returning id`)) as unknown as {
        rows: unknown[];
      };
      return rows.length > 0 ? true : undefined;
    }, 20_000);
    const [first] = await deliveriesOf(hook.id);
    expect(first).toMatchObject({ attemptCount: 1, success: false });
    const again = await dataOf(
      await dashboardCall(
        ctx.app,
        owner,
        'POST',
        `/api/webhooks/${hook.id}/deliveries/${first.id}/redeliver`,
      ),
    );
    expect(again).toMatchObject({ attemptCount: 2, success: true });
    await db().execute(sql`update webhook_outbox set due_at = now() where webhook_id = ${hook.id}`);
    const records = await waitFor(async () => {
      const list = await deliveriesOf(hook.id);
      return list.length === 3 ? list : undefined;
    }, 20_000);
    expect(records.map((record: { attemptCount: number }) => record.attemptCount).sort()).toEqual([1, 2, 3]);
  });

  it('stops after the last attempt of the schedule, counting consecutive failures', async () => {
    const hook = await buildWebhook(['email.sent']);
    receiver.answer(hook.path, () => ({ status: 503 }));
    await sendOne('down@example.test');
    // WEBHOOK_RETRY_SCHEDULE=1,1,1: 4 attempts.
    await waitFor(
      async () => ((await deliveriesOf(hook.id)).length === 4 ? true : undefined),
      30_000,
      '4 attempts',
    );
    await new Promise((resolve) => setTimeout(resolve, 2500));
    expect(receiver.to(hook.path)).toHaveLength(4);
    const webhook = await webhookOf(hook.id);
    expect(webhook).toMatchObject({ consecutiveFailures: 4, isActive: true, lastSuccessAt: null });
  });

  it('disables the webhook at once on 410 Gone, without retrying', async () => {
    const hook = await buildWebhook(['email.sent']);
    receiver.answer(hook.path, () => ({ status: 410, body: 'gone' }));
    await sendOne('gone@example.test');
    const webhook = await waitFor(async () => {
      const w = await webhookOf(hook.id);
      return w.isActive ? undefined : w;
    });
    expect(webhook.disabledReason).toMatch(/410/);
    await new Promise((resolve) => setTimeout(resolve, 2500));
    expect(receiver.to(hook.path)).toHaveLength(1);
    expect((await deliveriesOf(hook.id)).map((d: any) => [d.responseStatus, d.success])).toEqual([
      [410, false],
    ]);
    // A disabled webhook gets no new events.
    await sendOne('gone-again@example.test');
    await new Promise((resolve) => setTimeout(resolve, 1500));
    expect(receiver.to(hook.path)).toHaveLength(1);
    // Re-enabled by a user, it receives again.
    receiver.answer(hook.path, () => ({ status: 200 }));
    await dataOf(await dashboardCall(ctx.app, owner, 'PUT', `/api/webhooks/${hook.id}`, { isActive: true }));
    expect((await webhookOf(hook.id)).disabledReason).toBeNull();
    await sendOne('back@example.test');
    await waitFor(async () => (receiver.to(hook.path).length === 2 ? true : undefined));
  });

  it('disables a webhook that failed for 5 days with no success, not one failing for less', async () => {
    const recent = await buildWebhook(['email.sent']);
    const stale = await buildWebhook(['email.sent']);
    for (const hook of [recent, stale]) receiver.answer(hook.path, () => ({ status: 500 }));
    const day = 24 * 60 * 60 * 1000;
    await db()
      .update(webhooks)
      .set({ failingSince: new Date(Date.now() - 4 * day), consecutiveFailures: 30 })
      .where(eq(webhooks.id, recent.id));
    await db()
      .update(webhooks)
      .set({ failingSince: new Date(Date.now() - 5 * day - 60_000), consecutiveFailures: 40 })
      .where(eq(webhooks.id, stale.id));
    for (const hook of [recent, stale]) {
      const delivery = await dataOf(
        await dashboardCall(ctx.app, owner, 'POST', `/api/webhooks/${hook.id}/test`),
      );
      expect(delivery).toMatchObject({ success: false, responseStatus: 500 });
    }
    expect(await webhookOf(recent.id)).toMatchObject({
      isActive: true,
      consecutiveFailures: 31,
      disabledReason: null,
    });
    const disabled = await webhookOf(stale.id);
    expect(disabled).toMatchObject({ isActive: false, consecutiveFailures: 41 });
    expect(disabled.disabledReason).toMatch(/5 days/);
    // The disabling moved the row's updatedAt (a change of the webhook, as a user's PUT is).
    const [staleRow] = await db().select().from(webhooks).where(eq(webhooks.id, stale.id));
    expect(staleRow!.updatedAt.getTime()).toBeGreaterThan(staleRow!.createdAt.getTime());
    // A success resets the streak and its clock.
    receiver.answer(recent.path, () => ({ status: 200 }));
    await dataOf(await dashboardCall(ctx.app, owner, 'POST', `/api/webhooks/${recent.id}/test`));
    expect(await webhookOf(recent.id)).toMatchObject({ isActive: true, consecutiveFailures: 0 });
    const [row] = await db().select().from(webhooks).where(eq(webhooks.id, recent.id));
    expect(row!.failingSince).toBeNull();
  });

  it('gives a message its whole schedule after a quiet spell, though the webhook failed 6 days ago', async () => {
    const hook = await buildWebhook(['email.sent']);
    // Failed 6 days ago (its last message's retries then ran out), nothing since; now the receiver
    // fails once, then recovers: the retry must still come.
    await db()
      .update(webhooks)
      .set({ failingSince: new Date(Date.now() - 6 * 24 * 60 * 60 * 1000), consecutiveFailures: 8 })
      .where(eq(webhooks.id, hook.id));
    receiver.answer(hook.path, (nth) => (nth === 1 ? { status: 503 } : { status: 200 }));
    await sendOne('quiet@example.test');
    await waitFor(async () => (receiver.to(hook.path).length >= 2 ? true : undefined), 20_000, 'the retry');
    const webhook = await waitFor(async () => {
      const w = await webhookOf(hook.id);
      return w.consecutiveFailures === 0 ? w : undefined;
    });
    expect(webhook).toMatchObject({ isActive: true, disabledReason: null });
  });

  it('answers 404 to a test whose webhook was deleted while its request was out, not 500', async () => {
    const hook = await buildWebhook(['email.sent']);
    receiver.answer(hook.path, () => ({ status: 200, delayMs: 800 }));
    const testing = dashboardCall(ctx.app, owner, 'POST', `/api/webhooks/${hook.id}/test`);
    await waitFor(async () => (receiver.to(hook.path).length === 1 ? true : undefined), 5_000, 'the request');
    expect((await dashboardCall(ctx.app, owner, 'DELETE', `/api/webhooks/${hook.id}`)).statusCode).toBe(200);
    expectError(await testing, 404, 'NOT_FOUND');
  });

  it('gives up an attempt after WEBHOOK_TIMEOUT_SECONDS and records it as failed', async () => {
    const hook = await buildWebhook(['email.sent']);
    receiver.answer(hook.path, () => ({ status: 200, delayMs: 4000 }));
    const started = Date.now();
    const delivery = await dataOf(
      await dashboardCall(ctx.app, owner, 'POST', `/api/webhooks/${hook.id}/test`),
    );
    expect(Date.now() - started).toBeLessThan(3900);
    expect(delivery).toMatchObject({ success: false, responseStatus: null, responseBody: null });
    expect(delivery.error).toMatch(/No answer within 2 s/);
    expect(delivery.durationMs).toBeGreaterThanOrEqual(1900);
  });

  it('keeps only the first 2 KB of a response body', async () => {
    const hook = await buildWebhook(['email.sent']);
    receiver.answer(hook.path, () => ({ status: 200, body: `${'x'.repeat(5000)}END` }));
    const delivery = await dataOf(
      await dashboardCall(ctx.app, owner, 'POST', `/api/webhooks/${hook.id}/test`),
    );
    expect(delivery.success).toBe(true);
    expect(delivery.responseBody).toBe('x'.repeat(2048));
  });

  it('test sends a signed sample event now; redeliver resends a delivery with the same webhook-id', async () => {
    const hook = await buildWebhook(['email.bounced', 'email.sent']);
    receiver.answer(hook.path, (nth) => (nth === 1 ? { status: 500 } : { status: 200 }));
    const first = await dataOf(await dashboardCall(ctx.app, owner, 'POST', `/api/webhooks/${hook.id}/test`));
    expect(first).toMatchObject({ success: false, attemptCount: 1, event: 'email.bounced' });
    const [request] = receiver.to(hook.path);
    const payload = verifyWebhook(hook.secret, request!) as any;
    expect(payload).toMatchObject({
      event: 'email.bounced',
      data: { status: 'bounced', error: expect.any(String) },
    });

    const again = await dataOf(
      await dashboardCall(
        ctx.app,
        owner,
        'POST',
        `/api/webhooks/${hook.id}/deliveries/${first.id}/redeliver`,
      ),
    );
    expect(again).toMatchObject({
      success: true,
      attemptCount: 2,
      messageId: first.messageId,
      payload: first.payload,
    });
    expect(again.id).not.toBe(first.id);
    const requests = receiver.to(hook.path);
    expect(requests).toHaveLength(2);
    expect(requests[1]!.headers['webhook-id']).toBe(requests[0]!.headers['webhook-id']);
    expect(requests[1]!.json).toEqual(requests[0]!.json);
    verifyWebhook(hook.secret, requests[1]!);
    expectError(
      await dashboardCall(
        ctx.app,
        owner,
        'POST',
        `/api/webhooks/${hook.id}/deliveries/del_unknown/redeliver`,
      ),
      404,
      'NOT_FOUND',
    );
  });

  it('rotate-secret: the new and the old secret both verify for 24 h, then only the new one', async () => {
    const hook = await buildWebhook(['email.sent']);
    const rotated = await dataOf(
      await dashboardCall(ctx.app, owner, 'POST', `/api/webhooks/${hook.id}/rotate-secret`),
    );
    expect(rotated.secret).toMatch(/^whsec_/);
    expect(rotated.secret).not.toBe(hook.secret);
    const expires = Date.parse(rotated.previousSecretExpiresAt) - Date.now();
    expect(expires).toBeGreaterThan(23.9 * 3600_000);
    expect(expires).toBeLessThanOrEqual(24 * 3600_000);
    await dataOf(await dashboardCall(ctx.app, owner, 'POST', `/api/webhooks/${hook.id}/test`));
    const [during] = receiver.to(hook.path);
    expect(String(during!.headers['webhook-signature']).split(' ')).toHaveLength(2);
    verifyWebhook(rotated.secret, during!);
    verifyWebhook(hook.secret, during!);

    await db()
      .update(webhooks)
      .set({
        previousSecrets: sql`jsonb_set(${webhooks.previousSecrets}, '{0,expiresAt}', to_jsonb(${new Date(Date.now() - 1000).toISOString()}::text))`,
      })
      .where(eq(webhooks.id, hook.id));
    await dataOf(await dashboardCall(ctx.app, owner, 'POST', `/api/webhooks/${hook.id}/test`));
    const after = receiver.to(hook.path)[1]!;
    expect(String(after.headers['webhook-signature']).split(' ')).toHaveLength(1);
    verifyWebhook(rotated.secret, after);
    expect(() => verifyWebhook(hook.secret, after)).toThrow();
    expect(JSON.stringify(await webhookOf(hook.id))).not.toContain('whsec_');
  });

  it('rotate-secret twice within 24 h (and twice at once): every secret rotated out still signs', async () => {
    const hook = await buildWebhook(['email.sent']);
    const rotate = async () =>
      dataOf(await dashboardCall(ctx.app, owner, 'POST', `/api/webhooks/${hook.id}/rotate-secret`));
    const first = await rotate();
    const [second, third] = await Promise.all([rotate(), rotate()]);
    await dataOf(await dashboardCall(ctx.app, owner, 'POST', `/api/webhooks/${hook.id}/test`));
    const [request] = receiver.to(hook.path);
    expect(String(request!.headers['webhook-signature']).split(' ')).toHaveLength(4);
    for (const secret of [hook.secret, first.secret, second.secret, third.secret])
      verifyWebhook(secret, request!);
    expect(new Set([first.secret, second.secret, third.secret]).size).toBe(3);
  });

  it('rotate-secret keeps the newest 3 secrets rotated out, so a loop of rotations cannot swell every delivery', async () => {
    // Review finding, session 14: every secret rotated out signed every delivery for 24 h, without
    // a bound: after 1,200 rotations the signature header passed a receiver's 16 KB header limit.
    const hook = await buildWebhook(['email.sent']);
    const secrets = [hook.secret];
    for (let i = 0; i < 6; i++) {
      const rotated = await dataOf(
        await dashboardCall(ctx.app, owner, 'POST', `/api/webhooks/${hook.id}/rotate-secret`),
      );
      secrets.push(rotated.secret);
    }
    await dataOf(await dashboardCall(ctx.app, owner, 'POST', `/api/webhooks/${hook.id}/test`));
    const [request] = receiver.to(hook.path);
    expect(String(request!.headers['webhook-signature']).split(' ')).toHaveLength(1 + PREVIOUS_SECRETS_KEPT);
    for (const secret of secrets.slice(-1 - PREVIOUS_SECRETS_KEPT)) verifyWebhook(secret, request!);
    expect(() => verifyWebhook(secrets[secrets.length - 2 - PREVIOUS_SECRETS_KEPT]!, request!)).toThrow();
  });

  it('records no attempt whose outbox row is gone, and a record without payload neither breaks the history nor is resent', async () => {
    // Review finding, session 14: a worker whose lease lapsed recorded its attempt after another
    // worker had attempted, recorded and deleted the row: the record's payload read null, the
    // delivery history answered 500 and redeliver POSTed the body `null`.
    const hook = await buildWebhook(['email.sent']);
    const late = {
      id: `whd_late${++pathCount}`,
      teamId: owner.teamId,
      webhookId: hook.id,
      messageId: 'msg_late',
      event: 'email.sent',
      payload: undefined,
      responseStatus: 200,
      responseBody: '',
      success: true,
      attemptCount: 1,
      durationMs: 5,
      error: null,
      createdAt: new Date(),
    };
    const result = { success: true, responseStatus: 200, responseBody: '', error: null, durationMs: 5 };
    await writeAttempts(db(), [
      {
        outcome: { delivery: late, result },
        row: {
          id: '999999999',
          webhookId: hook.id,
          teamId: owner.teamId,
          messageId: 'msg_late',
          event: 'email.sent',
          body: '{}',
          attempt: 1,
          claims: 1,
          webhook: null,
        },
      },
    ]);
    expect(await deliveriesOf(hook.id)).toEqual([]);

    // A record written so before the fix: listed with payload null, not resent.
    await db().execute(
      sql`insert into webhook_deliveries (id, team_id, webhook_id, message_id, event, payload, success, attempt_count)
        values ('whd_legacy', ${owner.teamId}, ${hook.id}, 'msg_legacy', 'email.sent', 'null'::jsonb, true, 1)`,
    );
    expect((await deliveriesOf(hook.id)).map((d) => [d.id, d.payload])).toEqual([['whd_legacy', null]]);
    expectError(
      await dashboardCall(ctx.app, owner, 'POST', `/api/webhooks/${hook.id}/deliveries/whd_legacy/redeliver`),
      400,
      'VALIDATION_ERROR',
    );
    expect(receiver.to(hook.path)).toEqual([]);
  });

  it('a committed status change delivers its event; a rolled-back one enqueues and sends nothing', async () => {
    const hook = await buildWebhook(['email.delivered', 'email.opened']);
    const emailId = await sendOne('outbox@example.test');
    await waitFor(async () => {
      const [row] = await db().select().from(emailLogs).where(eq(emailLogs.id, emailId));
      return row?.status === 'sent' ? true : undefined;
    });
    const email = { id: emailId, teamId: owner.teamId };
    await expect(
      db().transaction(async (tx) => {
        const moved = await transition(tx, email, { status: 'opened' });
        expect(moved?.status).toBe('opened');
        throw new Error('roll back');
      }),
    ).rejects.toThrow('roll back');
    await db().transaction((tx) => transition(tx, email, { status: 'delivered' }));
    const [request] = await waitFor(async () =>
      receiver.to(hook.path).length >= 1 ? receiver.to(hook.path) : undefined,
    );
    expect((verifyWebhook(hook.secret, request!) as any).event).toBe('email.delivered');
    await new Promise((resolve) => setTimeout(resolve, 1500));
    expect(receiver.to(hook.path)).toHaveLength(1);
    // Every event ever queued for the webhook: delivered (records) or still waiting (outbox rows).
    const queued = (await db().execute(
      sql`select event from webhook_deliveries where webhook_id = ${hook.id}
        union all select event from webhook_outbox where webhook_id = ${hook.id}`,
    )) as unknown as { rows: { event: string }[] };
    expect(queued.rows.map((r) => r.event)).toEqual(['email.delivered']);
  });

  it("webhooks of another team get none of this team's events and cannot be read across teams", async () => {
    const stranger = await setupOwner(ctx.app);
    const theirs = await buildWebhook(ALL_EVENTS, stranger);
    const mine = await buildWebhook(['email.queued']);
    await sendOne('isolated@example.test');
    await waitFor(async () => (receiver.to(mine.path).length >= 1 ? true : undefined));
    await new Promise((resolve) => setTimeout(resolve, 1000));
    expect(receiver.to(theirs.path)).toEqual([]);
    expectError(await dashboardCall(ctx.app, owner, 'GET', `/api/webhooks/${theirs.id}`), 404, 'NOT_FOUND');
    const [row] = await db()
      .select({ n: sql<number>`count(*)::int` })
      .from(webhooks)
      .where(and(eq(webhooks.teamId, stranger.teamId)));
    expect(row!.n).toBe(1);
  });
});
