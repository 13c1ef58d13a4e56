import { sql } from 'drizzle-orm';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { prepareSend } from '../src/modules/emails/send.service.ts';
import { createTestContext, type TestContext } from './helpers/app.ts';
import { dashboardCall, expectError, send } from './helpers/factories.ts';
import { scheduledSend } from './helpers/retention.ts';
import { createTeamWithKey } from './helpers/sending-team.ts';
import { startWebhookReceiver, type WebhookReceiver } from './helpers/webhook-receiver.ts';

/**
 * Tenant isolation of the ids a request names besides its path (security review, session 22): the
 * access matrix (access-matrix.test.ts) calls every route with another team's path ids; these are
 * the ids in bodies, sub-resources of another resource of the same team, and the internal copy a
 * resend makes. Each must stay within the caller's team (and resource), answering as for an
 * unknown id.
 */
describe('ids named besides the path stay in their team and resource', () => {
  let ctx: TestContext;
  let receiver: WebhookReceiver;

  beforeAll(async () => {
    // The receiver listens on 127.0.0.1.
    ctx = await createTestContext('postgres', {
      WEBHOOKS_ALLOW_PRIVATE: 'true',
      WEBHOOK_TIMEOUT_SECONDS: '2',
    });
    receiver = await startWebhookReceiver();
  });
  afterAll(async () => {
    await ctx?.close();
    await receiver?.close();
  });

  async function rows(query: ReturnType<typeof sql>): Promise<Record<string, unknown>[]> {
    return ((await ctx.context.db.execute(query)) as unknown as { rows: Record<string, unknown>[] }).rows;
  }

  it("a resend copies only its own team's stored attachments, never another team's", async () => {
    const ours = await createTeamWithKey(ctx.app);
    const theirs = await createTeamWithKey(ctx.app);
    const theirEmail = await scheduledSend(ctx.app, theirs); // one stored attachment, rows.csv
    const caller = { teamId: ours.owner.teamId, apiKeyId: null };
    const input = { templateId: ours.templateId, to: 'ada@example.test', variables: { first_name: 'Ada' } };
    // The copy as a resend of `theirEmail` would make it, were the id ever not the team's own.
    const resend = await prepareSend(ctx.context, caller, input, {
      resendOf: theirEmail,
      copyAttachmentsOf: theirEmail,
      attachmentCount: 1,
    });

    const [outcome] = await ctx.context.acceptBatcher.submitTogether([resend.rows]);

    expect(outcome?.status).toBe('rejected');
    expect((outcome as PromiseRejectedResult).reason).toMatchObject({ code: 'NOT_FOUND' });
    expect(await rows(sql`select id from email_attachments where email_id = ${resend.accepted.id}`)).toEqual(
      [],
    );
    expect(await rows(sql`select id from email_logs where team_id = ${ours.owner.teamId}`)).toEqual([]);
    // Theirs is untouched.
    expect(await rows(sql`select filename from email_attachments where email_id = ${theirEmail}`)).toEqual([
      { filename: 'rows.csv' },
    ]);
  });

  it("refuses another team's adapter as a send's, a test send's or a fallback adapter", async () => {
    const ours = await createTeamWithKey(ctx.app);
    const theirs = await createTeamWithKey(ctx.app);

    const sent = await send(ctx.app, ours.key, {
      templateId: ours.templateId,
      to: 'ada@example.test',
      adapterId: theirs.adapterId,
    });
    expect(expectError(sent, 400, 'VALIDATION_ERROR').details.reason).toBe('UNKNOWN_ADAPTER');

    const tested = await dashboardCall(
      ctx.app,
      ours.owner,
      'POST',
      `/api/templates/${ours.templateId}/send-test`,
      {
        adapterId: theirs.adapterId,
      },
    );
    expect(expectError(tested, 400, 'VALIDATION_ERROR').details.reason).toBe('UNKNOWN_ADAPTER');

    const created = await dashboardCall(ctx.app, ours.owner, 'POST', '/api/adapters', {
      name: 'Backup',
      type: 'smtp',
      config: { host: '127.0.0.1', port: 2525 },
      defaultFrom: 'sender@postwright.test',
      fallbackAdapterId: theirs.adapterId,
    });
    expect(expectError(created, 400, 'VALIDATION_ERROR').details.issues[0].path).toBe('fallbackAdapterId');
    const updated = await dashboardCall(ctx.app, ours.owner, 'PUT', `/api/adapters/${ours.adapterId}`, {
      fallbackAdapterId: theirs.adapterId,
    });
    expect(expectError(updated, 400, 'VALIDATION_ERROR').details.issues[0].path).toBe('fallbackAdapterId');
    const adapter = await dashboardCall(ctx.app, ours.owner, 'GET', `/api/adapters/${ours.adapterId}`);
    expect(adapter.json().data.fallbackAdapterId).toBeNull();
    // Nothing was queued for our team.
    expect(await rows(sql`select id from email_logs where team_id = ${ours.owner.teamId}`)).toEqual([]);
  });

  it("redelivers a delivery only through its own webhook, not another of the team's", async () => {
    const team = await createTeamWithKey(ctx.app);
    const webhook = async (name: string) => {
      const response = await dashboardCall(ctx.app, team.owner, 'POST', '/api/webhooks', {
        name,
        url: receiver.url(`/isolation-${name}-${team.owner.teamId}`),
        events: ['email.sent'],
      });
      expect(response.statusCode, response.body).toBe(201);
      return response.json().data as { id: string };
    };
    const first = await webhook('first');
    const second = await webhook('second');
    const tested = await dashboardCall(ctx.app, team.owner, 'POST', `/api/webhooks/${first.id}/test`);
    expect(tested.statusCode, tested.body).toBe(200);
    const delivery = tested.json().data as { id: string };

    const across = await dashboardCall(
      ctx.app,
      team.owner,
      'POST',
      `/api/webhooks/${second.id}/deliveries/${delivery.id}/redeliver`,
    );
    expectError(across, 404, 'NOT_FOUND');
    const deliveries = await dashboardCall(
      ctx.app,
      team.owner,
      'GET',
      `/api/webhooks/${second.id}/deliveries`,
    );
    expect(deliveries.json().data).toEqual([]);
    expect(receiver.to(`/isolation-second-${team.owner.teamId}`)).toEqual([]);
  });

  it("lists no log of another team's template and never runs another team's template in a batch", async () => {
    const ours = await createTeamWithKey(ctx.app);
    const theirs = await createTeamWithKey(ctx.app);
    expect(
      (await send(ctx.app, theirs.key, { templateId: theirs.templateId, to: 'ada@example.test' })).statusCode,
    ).toBe(202);

    const logs = await dashboardCall(ctx.app, ours.owner, 'GET', `/api/logs?templateId=${theirs.templateId}`);
    expect(logs.json().data).toMatchObject({ items: [], total: 0 });

    const batch = await ctx.app.inject({
      method: 'POST',
      url: '/api/v1/send/batch',
      headers: { 'x-api-key': ours.key },
      payload: { emails: [{ templateId: theirs.templateId, to: 'ada@example.test' }] },
    });
    expect(batch.json().data.results[0].error.code).toBe('INVALID_TEMPLATE');
    expect(await rows(sql`select id from email_logs where team_id = ${ours.owner.teamId}`)).toEqual([]);
  });
});
