import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestContext, type TestContext } from './helpers/app.ts';
import { setupOwner } from './helpers/auth.ts';
import { dashboardCall, dataOf } from './helpers/factories.ts';
import { startWebhookReceiver, type WebhookReceiver } from './helpers/webhook-receiver.ts';

describe('webhook secrets stay out of the logs (LOG_LEVEL=trace)', () => {
  let ctx: TestContext;
  let receiver: WebhookReceiver;
  const lines: string[] = [];

  beforeAll(async () => {
    ctx = await createTestContext(
      'postgres',
      { LOG_LEVEL: 'trace', WEBHOOKS_ALLOW_PRIVATE: 'true' },
      { logStream: { write: (line: string) => void lines.push(line) } },
    );
    receiver = await startWebhookReceiver();
  });
  afterAll(async () => {
    await ctx?.close();
    await receiver?.close();
  });

  it('create, rotate-secret and a signed test delivery log neither secret nor its key', async () => {
    const owner = await setupOwner(ctx.app);
    const hook = await dataOf(
      await dashboardCall(ctx.app, owner, 'POST', '/api/webhooks', {
        name: 'logged',
        url: receiver.url('/logged'),
        events: ['email.sent'],
      }),
      201,
    );
    const rotated = await dataOf(
      await dashboardCall(ctx.app, owner, 'POST', `/api/webhooks/${hook.id}/rotate-secret`),
    );
    const delivery = await dataOf(
      await dashboardCall(ctx.app, owner, 'POST', `/api/webhooks/${hook.id}/test`),
    );
    expect(delivery.success).toBe(true);
    const log = lines.join('');
    expect(log).toContain('/api/webhooks'); // the requests were logged
    for (const secret of [hook.secret, rotated.secret]) {
      expect(log).not.toContain(secret);
      expect(log).not.toContain(secret.slice('whsec_'.length));
    }
    expect(log).not.toContain('whsec_');
  });
});
