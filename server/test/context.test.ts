import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type Context, createContext } from '../src/context.ts';
import { findAdapter, providerFor } from '../src/modules/adapters/index.ts';
import { isSetupTokenValid } from '../src/modules/auth/setup-token.ts';
import { createTestContext, type TestContext } from './helpers/app.ts';
import { setupOwner } from './helpers/auth.ts';
import { buildSmtpAdapter } from './helpers/factories.ts';
import { freePort } from './helpers/ports.ts';
import { PNG_1X1, uploadImage } from './helpers/uploads.ts';

/**
 * Issue #9 "One composition root": one context per process, built once, reached by the API and the
 * worker alike; nothing of it is module state, so two contexts in one process share nothing.
 */
describe('context', () => {
  let ctx: TestContext;
  const others: Context[] = [];
  /** A second context over the test's database and queue (as a second app in the process would build). */
  async function another(env: { SETUP_TOKEN?: string | undefined } = {}): Promise<Context> {
    const { config, database, queue, encryptionKey } = ctx.context;
    const other = await createContext({ config: { ...config, ...env }, database, queue, encryptionKey });
    others.push(other);
    return other;
  }

  beforeAll(async () => {
    ctx = await createTestContext('postgres');
  });
  afterAll(async () => {
    for (const other of others) await other.close();
    await ctx?.close();
  });

  it('two contexts in one process share no cache, batcher, provider pool or storage', async () => {
    const a = ctx.context;
    const b = await another();
    expect(b.caches.apiKeys).not.toBe(a.caches.apiKeys);
    expect(b.caches.templatesForSend).not.toBe(a.caches.templatesForSend);
    expect(b.caches.adaptersForSend).not.toBe(a.caches.adaptersForSend);
    expect(b.providers).not.toBe(a.providers);
    expect(b.acceptBatcher).not.toBe(a.acceptBatcher);
    expect(b.storage).not.toBe(a.storage);
  });

  it('generates a setup token per context when none is configured, and keeps a configured one', async () => {
    const a = await another({ SETUP_TOKEN: undefined });
    const b = await another({ SETUP_TOKEN: undefined });
    expect(a.config.SETUP_TOKEN).toMatch(/^[\w-]{43}$/);
    expect(b.config.SETUP_TOKEN).not.toBe(a.config.SETUP_TOKEN);
    expect(isSetupTokenValid(a.config, b.config.SETUP_TOKEN)).toBe(false);
    expect(isSetupTokenValid(a.config, a.config.SETUP_TOKEN)).toBe(true);
    expect((await another({ SETUP_TOKEN: 'configured-token-0123456789' })).config.SETUP_TOKEN).toBe(
      'configured-token-0123456789',
    );
  });

  it('the API stores uploads in the context storage, where the worker reaches them', async () => {
    expect(ctx.app.ctx.storage).toBe(ctx.context.storage);
    const owner = await setupOwner(ctx.app);
    const response = await uploadImage(ctx.app, owner, { filename: 'a.png', bytes: PNG_1X1 });
    expect(response.statusCode).toBe(201);
    const stored = await ctx.context.storage.get(response.json().data.key);
    expect(stored && Buffer.concat(await stored.body.toArray())).toEqual(PNG_1X1);
  });

  it('close() closes the providers the worker opened through the context', async () => {
    const other = await another();
    const owner = await setupOwner(ctx.app);
    const adapter = await buildSmtpAdapter(ctx.app, owner, await freePort());
    const row = (await findAdapter(ctx.context.db, owner.teamId, adapter.id))!;
    const provider = providerFor(other, row);
    expect(providerFor(other, row)).toBe(provider);
    expect(ctx.context.providers.size).toBe(0);
    expect(other.providers.size).toBe(1);
    await other.close();
    expect(other.providers.size).toBe(0);
  });
});
