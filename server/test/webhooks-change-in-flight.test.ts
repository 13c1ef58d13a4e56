import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { WEBHOOK_RECHECK_MS } from '../src/modules/webhooks/webhook-dispatcher.ts';
import { createTestContext, type TestContext, waitFor } from './helpers/app.ts';
import type { TeamOwner } from './helpers/auth.ts';
import { dashboardCall, dataOf, send } from './helpers/factories.ts';
import { createTeamWithKey } from './helpers/sending-team.ts';
import { startWebhookReceiver, type WebhookReceiver } from './helpers/webhook-receiver.ts';

/**
 * Rows the dispatcher claimed ahead of its request slots, behind a slow receiver, follow a change
 * of their webhook made meanwhile (review finding, session 18: they went to a deleted webhook, and
 * to its old URL, as long as they waited). WORKER_CONCURRENCY 2 gives each webhook one request at
 * a time and two rows claimed: the second waits behind the first's slow answer.
 */
describe('a webhook changed while its deliveries wait for a request slot', () => {
  const ANSWER_AFTER_MS = WEBHOOK_RECHECK_MS + 1_000;
  let ctx: TestContext;
  let receiver: WebhookReceiver;
  let owner: TeamOwner;
  let apiKey: string;
  let templateId: string;
  let paths = 0;

  beforeAll(async () => {
    ctx = await createTestContext('postgres', { WEBHOOKS_ALLOW_PRIVATE: 'true', WORKER_CONCURRENCY: '2' });
    receiver = await startWebhookReceiver();
    await ctx.startWorkers();
  });
  beforeEach(async () => {
    ({ owner, key: apiKey, templateId } = await createTeamWithKey(ctx.app));
  });
  afterAll(async () => {
    await ctx?.close();
    await receiver?.close();
  });

  /** A webhook of `email.queued` on a fresh path answered after ANSWER_AFTER_MS, and two sends to it. */
  async function slowWebhookWithTwoDeliveries() {
    const path = `/slow-${++paths}`;
    receiver.answer(path, () => ({ delayMs: ANSWER_AFTER_MS }));
    const webhook = await dataOf(
      await dashboardCall(ctx.app, owner, 'POST', '/api/webhooks', {
        name: 'Slow',
        url: receiver.url(path),
        events: ['email.queued'],
      }),
      201,
    );
    for (const to of ['one@example.test', 'two@example.test']) {
      const response = await send(ctx.app, apiKey, { templateId, to });
      expect(response.statusCode, response.body).toBe(202);
    }
    await waitFor(async () => (receiver.to(path).length > 0 ? true : undefined), 10_000, 'the first request');
    return { webhook, path };
  }

  const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

  it('drops the waiting delivery of a webhook deleted meanwhile (was sent to it)', async () => {
    const { webhook, path } = await slowWebhookWithTwoDeliveries();
    const deleted = await dashboardCall(ctx.app, owner, 'DELETE', `/api/webhooks/${webhook.id}`);
    expect(deleted.statusCode, deleted.body).toBe(200);
    await sleep(ANSWER_AFTER_MS * 2 + 500);
    expect(receiver.to(path)).toHaveLength(1);
  });

  it('sends the waiting delivery to the webhook’s new URL (was its old one)', async () => {
    const { webhook, path } = await slowWebhookWithTwoDeliveries();
    const moved = `/moved-${paths}`;
    const updated = await dashboardCall(ctx.app, owner, 'PUT', `/api/webhooks/${webhook.id}`, {
      url: receiver.url(moved),
    });
    expect(updated.statusCode, updated.body).toBe(200);
    await waitFor(
      async () => (receiver.to(moved).length > 0 ? true : undefined),
      10_000,
      'the moved request',
    );
    expect(receiver.to(path)).toHaveLength(1);
    expect(receiver.to(moved)).toHaveLength(1);
  });
});
