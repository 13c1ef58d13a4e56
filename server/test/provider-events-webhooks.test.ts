import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestContext, type TestContext, waitFor } from './helpers/app.ts';
import { sessionHeaders } from './helpers/auth.ts';
import { dashboardCall, dataOf, send } from './helpers/factories.ts';
import {
  FAKE_CREDENTIALS,
  FAKE_ENDPOINT_VARIABLES,
  type FakeProvider,
  startFakeProvider,
} from './helpers/fake-providers.ts';
import { createTeamWithKey } from './helpers/sending-team.ts';
import { startTestSmtpServer, type TestSmtpServer } from './helpers/smtp-server.ts';
import { startWebhookReceiver, verifyWebhook, type WebhookReceiver } from './helpers/webhook-receiver.ts';

/**
 * Issue #11: a provider event is a status change like any other: it reaches the team's webhooks
 * through the outbox. End to end: the worker sends through Postmark (a fake speaking its API;
 * status `sent`, providerMessageId recorded),
 * the provider reports a hard bounce for that id, the team's webhook receives `email.bounced`
 * with the diagnostic, signed.
 */
describe('provider events reach the outbound webhooks', () => {
  let ctx: TestContext;
  let smtp: TestSmtpServer;
  let receiver: WebhookReceiver;
  let postmarkApi: FakeProvider;

  beforeAll(async () => {
    smtp = await startTestSmtpServer();
    receiver = await startWebhookReceiver();
    postmarkApi = await startFakeProvider('postmark');
    ctx = await createTestContext('postgres', {
      WEBHOOKS_ALLOW_PRIVATE: 'true',
      [FAKE_ENDPOINT_VARIABLES.postmark]: postmarkApi.url,
    });
    await ctx.startWorkers();
  });
  afterAll(async () => {
    await ctx?.close();
    await smtp?.close();
    await receiver?.close();
    await postmarkApi?.close();
  });

  it('a hard bounce of a sent email is delivered as a signed email.bounced webhook', async () => {
    const team = await createTeamWithKey(ctx.app, { smtpPort: smtp.port });
    const hook = await dataOf(
      await dashboardCall(ctx.app, team.owner, 'POST', '/api/webhooks', {
        name: 'bounces',
        url: receiver.url('/bounces'),
        events: ['email.bounced'],
      }),
      201,
    );
    const postmark = await dataOf(
      await dashboardCall(ctx.app, team.owner, 'POST', '/api/adapters', {
        name: 'Postmark',
        type: 'mailapi_server',
        config: FAKE_CREDENTIALS.postmark,
      }),
      201,
    );
    const { eventsUrl } = await dataOf(
      await ctx.app.inject({
        method: 'GET',
        url: `/api/adapters/${postmark.id}`,
        headers: sessionHeaders(ctx.app, team.owner),
      }),
    );
    const { id } = await dataOf(
      await send(ctx.app, team.key, {
        templateId: team.templateId,
        to: 'bad@example.com',
        from: 'sender@example.com',
        adapterId: postmark.id,
        variables: {},
      }),
      202,
    );
    const sent = await waitFor(async () => {
      const log = await dataOf(
        await ctx.app.inject({
          method: 'GET',
          url: `/api/logs/${id}`,
          headers: sessionHeaders(ctx.app, team.owner),
        }),
      );
      return log.status === 'sent' ? log : undefined;
    });
    expect(sent.providerMessageId).toEqual(expect.any(String));

    const bounce = await ctx.app.inject({
      method: 'POST',
      url: new URL(eventsUrl).pathname,
      headers: { 'content-type': 'application/json' },
      payload: {
        RecordType: 'Bounce',
        Type: 'HardBounce',
        MessageID: sent.providerMessageId,
        Email: 'bad@example.com',
        BouncedAt: new Date().toISOString(),
        Details: 'smtp;550 5.1.1 user unknown',
      },
    });
    expect(await dataOf(bounce)).toEqual({ received: 1, matched: 1 });

    const [delivery] = await waitFor(async () => {
      const got = receiver.to('/bounces');
      return got.length > 0 ? got : undefined;
    });
    const payload = verifyWebhook(hook.secret, delivery!) as Record<string, any>;
    expect(payload).toMatchObject({
      event: 'email.bounced',
      data: { emailId: id, status: 'bounced', error: 'smtp;550 5.1.1 user unknown' },
    });
    // Issue #11: the payload names the recipient the provider event was about.
    expect(payload.data.recipients).toEqual(['bad@example.com']);
  });
});
