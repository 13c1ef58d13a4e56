import { createServer } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestContext, type TestContext, waitFor } from './helpers/app.ts';
import { setupOwner } from './helpers/auth.ts';
import {
  buildApiKey,
  buildTemplate,
  dashboardCall,
  dataOf,
  send,
  simpleDesign,
} from './helpers/factories.ts';
import { FAKE_CREDENTIALS, type FakeProvider, startFakeProvider } from './helpers/fake-providers.ts';

/**
 * A hosted-API send given up at its deadline while its request goes on keeps its connection busy;
 * the worker keeps that connection's slot until the request ends, so the next email does not wait
 * inside the connection pool past its own deadline (review finding, session 15: it was then
 * recorded failed "may have been delivered", and Postmark still got it seconds later).
 */
describe('hosted-API send deadline and connection slots', () => {
  let ctx: TestContext;
  let postmark: FakeProvider;

  beforeAll(async () => {
    postmark = await startFakeProvider('postmark');
    ctx = await createTestContext('postgres', {
      ADAPTER_MAX_CONNECTIONS: '1',
      SEND_TIMEOUT_SECONDS: '1',
      PROVIDER_ENDPOINT_POSTMARK: postmark.url,
    });
    await ctx.startWorkers();
  });
  afterAll(async () => {
    await ctx?.close();
    await postmark?.close();
  });

  it('records the slow email ambiguous, and sends the next one once the connection is free, not ambiguous', async () => {
    const { owner, key, templateId } = await teamSendingThrough(
      ctx,
      'mailapi_server',
      FAKE_CREDENTIALS.postmark,
    );
    postmark.delayNextSends(2_500);
    const slow = (await send(ctx.app, key, { templateId, to: 'slow@example.test' })).json().data.id;
    await waitFor(async () => postmark.sends().length === 1);
    const next = (await send(ctx.app, key, { templateId, to: 'next@example.test' })).json().data.id;
    const settled = (id: string) =>
      waitFor(async () => {
        const log = await dataOf(await dashboardCall(ctx.app, owner, 'GET', `/api/logs/${id}`));
        return ['sent', 'failed'].includes(log.status) ? log : undefined;
      }, 20_000);
    const slowLog = await settled(slow);
    expect(slowLog.status).toBe('failed');
    expect(slowLog.errorMessage).toContain('may have been delivered');
    const nextLog = await settled(next);
    expect(nextLog.status, nextLog.errorMessage).toBe('sent');
    await new Promise((resolve) => setTimeout(resolve, 500));
    const toNext = postmark.sends().filter((request) => request.json?.To === 'next@example.test');
    expect(toNext).toHaveLength(1);
  });
});

describe('a hosted-API request that never ends', () => {
  it("gives the adapter's slot back one send deadline later, so the next email is still tried", async () => {
    // Review finding, session 15: the slot waited for the hung request itself, which mailgun.js
    // (no request timeout) never ends: every later email of the adapter waited for good.
    const sockets = new Set<import('node:net').Socket>();
    let requests = 0;
    const hung = createServer((socket) => {
      sockets.add(socket);
      socket.on('error', () => {});
      socket.once('data', () => {
        requests += 1;
      });
    });
    await new Promise<void>((resolve) => hung.listen(0, '127.0.0.1', resolve));
    const port = (hung.address() as import('node:net').AddressInfo).port;
    const ctx = await createTestContext('postgres', {
      ADAPTER_MAX_CONNECTIONS: '1',
      SEND_TIMEOUT_SECONDS: '1',
      PROVIDER_ENDPOINT_MAILGUN: `http://127.0.0.1:${port}`,
    });
    try {
      await ctx.startWorkers();
      const { key, templateId } = await teamSendingThrough(ctx, 'mailapi_domain', FAKE_CREDENTIALS.mailgun);
      await send(ctx.app, key, { templateId, to: 'first@example.test' });
      await waitFor(async () => (requests === 1 ? true : undefined), 10_000);
      await send(ctx.app, key, { templateId, to: 'second@example.test' });
      // 1 s deadline for the first, 1 s more for its request to end: then the second goes out.
      await waitFor(async () => (requests === 2 ? true : undefined), 10_000, 'the second request');
    } finally {
      await ctx.close();
      for (const socket of sockets) socket.destroy();
      await new Promise<void>((resolve) => hung.close(() => resolve()));
    }
  });
});

/** A team of its own (owner, API key, template) whose default adapter is a hosted API of `type`. */
async function teamSendingThrough(ctx: TestContext, type: string, config: object) {
  const owner = await setupOwner(ctx.app);
  const { key } = await buildApiKey(ctx.app, owner);
  const { id: templateId } = await buildTemplate(ctx.app, owner, { designJson: simpleDesign('Hi') });
  await dataOf(
    await dashboardCall(ctx.app, owner, 'POST', '/api/adapters', {
      name: type,
      type,
      config,
      defaultFrom: 'Postwright Test <sender@postwright.test>',
      isDefault: true,
    }),
    201,
  );
  return { owner, key, templateId };
}
