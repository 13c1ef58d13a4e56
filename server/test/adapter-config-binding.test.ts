import { createCipheriv, randomBytes } from 'node:crypto';
import { eq } from 'drizzle-orm';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { adapters } from '../src/db/schema/index.ts';
import { upgradeLegacyAdapterConfigs } from '../src/modules/adapters/index.ts';
import { createTestContext, type TestContext } from './helpers/app.ts';
import { sessionHeaders, setupOwner, type TeamOwner } from './helpers/auth.ts';
import { buildSmtpAdapter } from './helpers/factories.ts';
import { closedPort } from './helpers/smtp-server.ts';

/**
 * Issue #8: an adapter's encrypted config is bound to its team and adapter id (AES-GCM associated
 * data), so someone who can write the database cannot move a team's credentials into another row
 * and read them back through the API. Rows written before (format v1) still work and are
 * re-encrypted at start-up.
 */
describe('adapter configs bound to their row', () => {
  let ctx: TestContext;
  let alice: TeamOwner;
  let bob: TeamOwner;
  let port: number;
  const secret = { username: 'relay-user', password: 'Sup3r-Secret-Pw!' };

  beforeAll(async () => {
    ctx = await createTestContext('postgres');
    port = await closedPort();
  });
  // Every case gets a team of its own (CONVENTIONS.md); the app and database are the file's.
  beforeEach(async () => {
    alice = await setupOwner(ctx.app);
    bob = await setupOwner(ctx.app);
  });
  afterAll(() => ctx?.close());

  const db = () => ctx.app.ctx.database.db;
  const storedText = async (id: string) =>
    (await db().select().from(adapters).where(eq(adapters.id, id)))[0]!.configEncrypted;
  const storeText = (id: string, configEncrypted: string) =>
    db().update(adapters).set({ configEncrypted }).where(eq(adapters.id, id));
  const getOne = (owner: TeamOwner, id: string) =>
    ctx.app.inject({ method: 'GET', url: `/api/adapters/${id}`, headers: sessionHeaders(ctx.app, owner) });
  const testOne = (owner: TeamOwner, id: string) =>
    ctx.app.inject({
      method: 'POST',
      url: `/api/adapters/${id}/test`,
      headers: sessionHeaders(ctx.app, owner),
    });
  const withSecret = (owner: TeamOwner, name: string) =>
    buildSmtpAdapter(ctx.app, owner, port, { name, config: { host: '127.0.0.1', port, ...secret } });

  it("refuses a ciphertext copied into another team's adapter, without revealing it", async () => {
    const source = await withSecret(alice, 'Alice relay');
    const target = await buildSmtpAdapter(ctx.app, bob, port, { name: 'Bob relay' });
    await storeText(target.id, await storedText(source.id));

    const read = await getOne(bob, target.id);
    expect(read.statusCode).toBe(409);
    expect(read.json().error.code).toBe('CONFLICT');
    expect(read.json().error.details.reason).toBe('CONFIG_UNREADABLE');
    expect(read.body).not.toContain(secret.password);
    const tested = await testOne(bob, target.id);
    expect(tested.json().data.success).toBe(false);
    expect(tested.body).not.toContain(secret.password);

    expect((await getOne(alice, source.id)).json().data.config).toMatchObject(secret);
  });

  it('refuses a ciphertext copied into another adapter of the same team', async () => {
    const source = await withSecret(alice, 'Primary');
    const target = await buildSmtpAdapter(ctx.app, alice, port, { name: 'Secondary' });
    await storeText(target.id, await storedText(source.id));
    expect((await getOne(alice, target.id)).statusCode).toBe(409);
  });

  it('reads a config written in the v1 format and re-encrypts it bound to its row at start-up', async () => {
    const adapter = await buildSmtpAdapter(ctx.app, alice, port, { name: 'Written before issue #8' });
    const config = { host: '127.0.0.1', port, ...secret };
    const iv = randomBytes(12);
    const cipher = createCipheriv('aes-256-gcm', ctx.app.ctx.encryptionKey, iv, { authTagLength: 16 });
    const ciphertext = Buffer.concat([cipher.update(JSON.stringify(config), 'utf8'), cipher.final()]);
    const legacy = ['v1', iv, cipher.getAuthTag(), ciphertext].map((p) => p.toString('base64')).join(':');
    await storeText(adapter.id, legacy);
    const before = (await getOne(alice, adapter.id)).json().data;
    expect(before.config).toEqual(config);

    expect(await upgradeLegacyAdapterConfigs(db(), ctx.app.ctx.encryptionKey)).toBeGreaterThanOrEqual(1);
    const upgraded = await storedText(adapter.id);
    expect(upgraded).toMatch(/^v2:/);
    const after = (await getOne(alice, adapter.id)).json().data;
    expect(after.config).toEqual(config);
    // The config did not change, so neither does updatedAt (the worker's provider cache key).
    expect(after.updatedAt).toBe(before.updatedAt);
    expect(await upgradeLegacyAdapterConfigs(db(), ctx.app.ctx.encryptionKey)).toBe(0);

    const target = await buildSmtpAdapter(ctx.app, bob, port, { name: 'Bob again' });
    await storeText(target.id, upgraded);
    expect((await getOne(bob, target.id)).statusCode).toBe(409);
  });
});
