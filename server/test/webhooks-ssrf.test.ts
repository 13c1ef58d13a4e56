import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { WebhookClient } from '../src/modules/webhooks/webhook-client.ts';
import {
  resolveWebhookHost,
  WebhookDestinationRefusedError,
} from '../src/modules/webhooks/webhook-destination.ts';
import { createTestContext, type TestContext } from './helpers/app.ts';
import { setupOwner, type TeamOwner } from './helpers/auth.ts';
import { dashboardCall, dataOf, expectError } from './helpers/factories.ts';
import { fakeDns } from './helpers/fake-dns.ts';
import { startWebhookReceiver, type WebhookReceiver } from './helpers/webhook-receiver.ts';

describe('webhook SSRF guard: the policy on resolved addresses (injected resolver)', () => {
  const dns = fakeDns({
    'internal.example': ['10.0.0.5'],
    'mixed.example': ['93.184.216.34', '192.168.1.1'],
    'metadata.example': ['169.254.169.254'],
    'public.example': ['93.184.216.34'],
  });
  const strict = { allowPrivate: false };

  it('refuses a name resolving to 10.x, or to any private address among public ones', async () => {
    await expect(resolveWebhookHost('internal.example', strict, dns)).rejects.toThrow(
      /internal\.example resolves to a private-network address.*WEBHOOKS_ALLOW_PRIVATE/,
    );
    await expect(resolveWebhookHost('mixed.example', strict, dns)).rejects.toBeInstanceOf(
      WebhookDestinationRefusedError,
    );
    // The refusal does not tell the caller which internal address the name has.
    await expect(resolveWebhookHost('internal.example', strict, dns)).rejects.not.toThrow(/10\.0\.0\.5/);
    expect(await resolveWebhookHost('public.example', strict, dns)).toEqual([
      { address: '93.184.216.34', family: 4 },
    ]);
  });

  it('refuses loopback and link-local literals unless allowed, metadata always', async () => {
    await expect(resolveWebhookHost('127.0.0.1', strict, dns)).rejects.toThrow(/loopback/);
    await expect(resolveWebhookHost('::1', strict, dns)).rejects.toThrow(/loopback/);
    await expect(resolveWebhookHost('169.254.10.1', strict, dns)).rejects.toThrow(/link-local/);
    await expect(resolveWebhookHost('169.254.169.254', strict, dns)).rejects.toThrow(/metadata/);
    await expect(resolveWebhookHost('metadata.example', { allowPrivate: true }, dns)).rejects.toThrow(
      /metadata/,
    );
    expect(await resolveWebhookHost('internal.example', { allowPrivate: true }, dns)).toHaveLength(1);
    expect(await resolveWebhookHost('127.0.0.1', { allowPrivate: true }, dns)).toHaveLength(1);
  });

  it('the HTTP client checks the address of every request through its lookup', async () => {
    const client = new WebhookClient({ policy: strict, timeoutSeconds: 2, resolve: dns });
    try {
      const before = dns.asked.length;
      const result = await client.post('http://internal.example:8080/hook', {}, '{}');
      expect(result).toMatchObject({ success: false, responseStatus: null });
      expect(result.error).toMatch(/private-network/);
      expect(dns.asked.length).toBe(before + 1);
      const literal = await client.post('http://169.254.169.254/latest/meta-data/', {}, '{}');
      expect(literal.error).toMatch(/metadata/);
    } finally {
      await client.close();
    }
  });
});

describe('webhook SSRF guard in the app (WEBHOOKS_ALLOW_PRIVATE unset)', () => {
  let ctx: TestContext;
  let owner: TeamOwner;
  let receiver: WebhookReceiver;

  beforeAll(async () => {
    ctx = await createTestContext('postgres', { WEBHOOK_TIMEOUT_SECONDS: '3' });
    receiver = await startWebhookReceiver();
  });
  // Every case gets a team of its own (CONVENTIONS.md); the app, database and receiver are the file's.
  beforeEach(async () => {
    owner = await setupOwner(ctx.app);
  });
  afterAll(async () => {
    await ctx?.close();
    await receiver?.close();
  });

  it('refuses 127.0.0.1 and 169.254.169.254 URLs when saved', async () => {
    for (const url of [receiver.url('/x'), 'http://169.254.169.254/latest', 'http://[::1]:8080/']) {
      const error = expectError(
        await dashboardCall(ctx.app, owner, 'POST', '/api/webhooks', {
          name: 'ssrf',
          url,
          events: ['email.sent'],
        }),
        400,
        'VALIDATION_ERROR',
      );
      expect(error.details.issues[0].path).toBe('body.url');
    }
  });

  it('refuses at delivery a name that resolves to loopback (localhost), so nothing reaches it', async () => {
    const port = new URL(receiver.url('/')).port;
    const hook = await dataOf(
      await dashboardCall(ctx.app, owner, 'POST', '/api/webhooks', {
        name: 'by name',
        url: `http://localhost:${port}/by-name`,
        events: ['email.sent'],
      }),
      201,
    );
    const delivery = await dataOf(
      await dashboardCall(ctx.app, owner, 'POST', `/api/webhooks/${hook.id}/test`),
    );
    expect(delivery).toMatchObject({ success: false, responseStatus: null });
    expect(delivery.error).toMatch(/localhost resolves to a loopback address/);
    expect(receiver.requests).toEqual([]);
  });
});
