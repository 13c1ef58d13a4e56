import { eq } from 'drizzle-orm';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { adapters } from '../src/db/schema/index.ts';
import { createTestContext, type TestContext } from './helpers/app.ts';
import {
  addTeamMember,
  type SignedInUser,
  sessionHeaders,
  setupOwner,
  type TeamOwner,
} from './helpers/auth.ts';
import { buildSmtpAdapter, expectError } from './helpers/factories.ts';
import { closedPort, startTestSmtpServer, type TestSmtpServer } from './helpers/smtp-server.ts';

type Method = 'GET' | 'POST' | 'PUT' | 'DELETE';

describe('adapters', () => {
  let ctx: TestContext;
  let owner: TeamOwner;
  let smtp: TestSmtpServer;
  /** A port nothing listens on, for adapters that are never connected to. */
  let deadPort: number;
  const call = (user: { cookie: string } | undefined, method: Method, url: string, payload?: object) =>
    ctx.app.inject({
      method,
      url,
      headers: user ? sessionHeaders(ctx.app, user) : {},
      ...(payload ? { payload } : {}),
    });
  const smtpBody = (overrides: Record<string, unknown> = {}) => ({
    name: 'Relay',
    type: 'smtp',
    config: { host: '127.0.0.1', port: deadPort, secure: false },
    defaultFrom: 'sender@postwright.test',
    ...overrides,
  });

  beforeAll(async () => {
    ctx = await createTestContext('postgres');
    smtp = await startTestSmtpServer();
    deadPort = await closedPort();
  });
  // Every case gets a team of its own (CONVENTIONS.md); the app and database are the file's.
  beforeEach(async () => {
    owner = await setupOwner(ctx.app);
  });
  afterAll(async () => {
    await ctx?.close();
    await smtp?.close();
  });

  it('creates an adapter without echoing its config; the first becomes default, a later one can take over', async () => {
    const team = await setupOwner(ctx.app);
    const response = await call(team, 'POST', '/api/adapters', smtpBody({ name: 'First' }));
    expect(response.statusCode, response.body).toBe(201);
    const body = response.json();
    expect(body.success).toBe(true);
    expect(Object.keys(body.data).sort()).toEqual(
      ['createdAt', 'defaultFrom', 'id', 'isActive', 'isDefault', 'name', 'type'].sort(),
    );
    expect(body.data).toMatchObject({
      id: expect.stringMatching(/^adp_/),
      name: 'First',
      type: 'smtp',
      defaultFrom: 'sender@postwright.test',
      isDefault: true,
      isActive: true,
      createdAt: expect.stringMatching(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/),
    });
    const second = await buildSmtpAdapter(ctx.app, team, deadPort, { name: 'Second' });
    expect(second.isDefault).toBe(false);
    const third = await buildSmtpAdapter(ctx.app, team, deadPort, { name: 'Third', isDefault: true });
    expect(third.isDefault).toBe(true);
    const list = await call(team, 'GET', '/api/adapters');
    expect(list.statusCode, list.body).toBe(200);
    const items: { id: string; isDefault: boolean }[] = list.json().data;
    expect(items).toHaveLength(3);
    expect(items.filter((a) => a.isDefault).map((a) => a.id)).toEqual([third.id]);
    const moved = await call(team, 'PUT', `/api/adapters/${second.id}`, { isDefault: true });
    expect(moved.statusCode, moved.body).toBe(200);
    const after: { id: string; isDefault: boolean }[] = (await call(team, 'GET', '/api/adapters')).json()
      .data;
    expect(after.filter((a) => a.isDefault).map((a) => a.id)).toEqual([second.id]);
  });

  it('returns the decrypted config only from get-one and stores it encrypted', async () => {
    const config = {
      host: '127.0.0.1',
      port: deadPort,
      secure: false,
      username: 'mailer',
      password: 'Sup3r-Secret-Pw!',
    };
    const created = await buildSmtpAdapter(ctx.app, owner, deadPort, { name: 'With creds', config });
    const list = await call(owner, 'GET', '/api/adapters');
    expect(list.json()).toMatchObject({ success: true });
    const items: Record<string, unknown>[] = list.json().data;
    expect(items.some((a) => a.id === created.id)).toBe(true);
    for (const item of items) expect(item).not.toHaveProperty('config');
    expect(list.body).not.toContain(config.password);
    const one = await call(owner, 'GET', `/api/adapters/${created.id}`);
    expect(one.statusCode, one.body).toBe(200);
    expect(one.json()).toMatchObject({
      success: true,
      data: { id: created.id, type: 'smtp', name: 'With creds' },
    });
    expect(one.json().data.config).toEqual(config);
    const [row] = await ctx.app.ctx.database.db.select().from(adapters).where(eq(adapters.id, created.id));
    expect(row?.configEncrypted).toEqual(expect.any(String));
    expect(row?.configEncrypted).not.toContain(config.password);
    expect(row?.configEncrypted).not.toContain('mailer');
  });

  it('validates the config against the type, and the other fields', async () => {
    const pathsOf = async (payload: object) => {
      const error = expectError(await call(owner, 'POST', '/api/adapters', payload), 400, 'VALIDATION_ERROR');
      return (error.details.issues as { path: string }[]).map((i) => i.path);
    };
    expect(await pathsOf(smtpBody({ config: { port: 25 } }))).toContain('config.host');
    expect(await pathsOf(smtpBody({ config: { host: 'smtp.example.test', port: 70000 } }))).toContain(
      'config.port',
    );
    expect(await pathsOf(smtpBody({ config: { host: 'smtp.example.test', port: 25, tls: true } }))).toContain(
      'config.tls',
    );
    expect(await pathsOf(smtpBody({ type: 'mailapi_a', config: { host: 'x', port: 25 } }))).toEqual(
      expect.arrayContaining(['config.apiKey', 'config.host']),
    );
    expect(await pathsOf(smtpBody({ type: 'carrier_pigeon' }))).toContain('body.type');
    expect(await pathsOf(smtpBody({ defaultFrom: 'not an address' }))).toContain('body.defaultFrom');
    expect(await pathsOf(smtpBody({ name: 'x'.repeat(101) }))).toContain('body.name');
    const list = await call(owner, 'GET', '/api/adapters');
    expect(list.json().data.map((a: { name: string }) => a.name)).not.toContain('x'.repeat(101));
  });

  it('updates name, defaultFrom, isActive and config (validated against the stored type)', async () => {
    const created = await buildSmtpAdapter(ctx.app, owner, deadPort, { name: 'Before' });
    const updated = await call(owner, 'PUT', `/api/adapters/${created.id}`, {
      name: 'After',
      defaultFrom: 'Ops <ops@postwright.test>',
      isActive: false,
      config: { host: 'smtp.example.test', port: 587 },
    });
    expect(updated.statusCode, updated.body).toBe(200);
    expect(updated.json()).toEqual({
      success: true,
      data: {
        id: created.id,
        name: 'After',
        defaultFrom: 'Ops <ops@postwright.test>',
        isActive: false,
        updatedAt: expect.stringMatching(/Z$/),
      },
    });
    const one = (await call(owner, 'GET', `/api/adapters/${created.id}`)).json().data;
    expect(one).toMatchObject({ name: 'After', isActive: false, type: 'smtp' });
    expect(one.config).toEqual({ host: 'smtp.example.test', port: 587 });
    // A config of another type is refused: the stored type decides.
    const wrongType = expectError(
      await call(owner, 'PUT', `/api/adapters/${created.id}`, { config: { apiKey: 're_123' } }),
      400,
      'VALIDATION_ERROR',
    );
    expect(wrongType.details.issues.map((i: { path: string }) => i.path)).toEqual(
      expect.arrayContaining(['config.apiKey', 'config.host', 'config.port']),
    );
    expectError(
      await call(owner, 'PUT', `/api/adapters/${created.id}`, { name: '' }),
      400,
      'VALIDATION_ERROR',
    );
    const after = (await call(owner, 'GET', `/api/adapters/${created.id}`)).json().data;
    expect(after.config).toEqual({ host: 'smtp.example.test', port: 587 });
    expect(after.name).toBe('After');
  });

  it('tests the connection: success against a live server, a failure result against a closed port', async () => {
    const live = await buildSmtpAdapter(ctx.app, owner, smtp.port, { name: 'Live' });
    const ok = await call(owner, 'POST', `/api/adapters/${live.id}/test`);
    expect(ok.statusCode, ok.body).toBe(200);
    expect(ok.json()).toEqual({ success: true, data: { success: true, message: expect.any(String) } });
    const dead = await buildSmtpAdapter(ctx.app, owner, await closedPort(), { name: 'Dead' });
    const failed = await call(owner, 'POST', `/api/adapters/${dead.id}/test`);
    expect(failed.statusCode, failed.body).toBe(200);
    expect(failed.json()).toMatchObject({ success: true, data: { success: false } });
    expect(failed.json().data.message).toMatch(/\S/);
  });

  it('deletes an adapter for good', async () => {
    const created = await buildSmtpAdapter(ctx.app, owner, deadPort, { name: 'Doomed' });
    const removed = await call(owner, 'DELETE', `/api/adapters/${created.id}`);
    expect(removed.statusCode, removed.body).toBe(200);
    expect(removed.json()).toEqual({ success: true });
    expectError(await call(owner, 'GET', `/api/adapters/${created.id}`), 404, 'NOT_FOUND');
    expectError(await call(owner, 'DELETE', `/api/adapters/${created.id}`), 404, 'NOT_FOUND');
    const list = (await call(owner, 'GET', '/api/adapters')).json().data;
    expect(list.map((a: { id: string }) => a.id)).not.toContain(created.id);
  });

  it('describes the six adapter types with their config fields', async () => {
    const response = await call(owner, 'GET', '/api/adapters/types');
    expect(response.statusCode, response.body).toBe(200);
    expect(response.json().success).toBe(true);
    const types: { type: string; name: string; description: string; configFields: object[] }[] =
      response.json().data;
    expect(types.map((t) => t.type).sort()).toEqual(
      ['mailapi_a', 'mailapi_b', 'mailapi_cloud', 'mailapi_domain', 'mailapi_server', 'smtp'].sort(),
    );
    for (const descriptor of types) {
      expect(descriptor.name).toMatch(/\S/);
      expect(descriptor.description).toMatch(/\S/);
      expect(descriptor.configFields.length).toBeGreaterThan(0);
      for (const field of descriptor.configFields) {
        expect(field).toMatchObject({
          name: expect.any(String),
          label: expect.any(String),
          type: expect.any(String),
          required: expect.any(Boolean),
          placeholder: expect.any(String),
        });
      }
    }
    const smtpFields = types.find((t) => t.type === 'smtp')!.configFields as {
      name: string;
      required: boolean;
    }[];
    expect(Object.fromEntries(smtpFields.map((f) => [f.name, f.required]))).toEqual({
      host: true,
      port: true,
      secure: false,
      username: false,
      password: false,
      tls: false,
    });
    const cloud = types.find((t) => t.type === 'mailapi_cloud')!.configFields as { name: string }[];
    // webhookTopicArn: optional, issue #11 (provider events).
    expect(cloud.map((f) => f.name).sort()).toEqual([
      'accessKeyId',
      'region',
      'secretAccessKey',
      'webhookTopicArn',
    ]);
  });

  it('applies the role matrix: members and viewers read the list and types only', async () => {
    const created = await buildSmtpAdapter(ctx.app, owner, deadPort, { name: 'Guarded' });
    const member = await addTeamMember(ctx.app, owner, 'member');
    const viewer = await addTeamMember(ctx.app, owner, 'viewer');
    for (const user of [member, viewer] as SignedInUser[]) {
      const list = await call(user, 'GET', '/api/adapters');
      expect(list.statusCode, list.body).toBe(200);
      expect(list.json().data.map((a: { id: string }) => a.id)).toContain(created.id);
      expect((await call(user, 'GET', '/api/adapters/types')).statusCode).toBe(200);
      expectError(await call(user, 'GET', `/api/adapters/${created.id}`), 403, 'FORBIDDEN');
      expectError(await call(user, 'POST', '/api/adapters', smtpBody()), 403, 'FORBIDDEN');
      expectError(await call(user, 'PUT', `/api/adapters/${created.id}`, { name: 'Mine' }), 403, 'FORBIDDEN');
      expectError(await call(user, 'DELETE', `/api/adapters/${created.id}`), 403, 'FORBIDDEN');
      expectError(await call(user, 'POST', `/api/adapters/${created.id}/test`), 403, 'FORBIDDEN');
    }
    const one = (await call(owner, 'GET', `/api/adapters/${created.id}`)).json().data;
    expect(one.name).toBe('Guarded');
    // Valid bodies: Fastify validates the body before the preHandler that authenticates.
    for (const [method, url, payload] of [
      ['GET', '/api/adapters', undefined],
      ['GET', '/api/adapters/types', undefined],
      ['GET', `/api/adapters/${created.id}`, undefined],
      ['POST', '/api/adapters', smtpBody()],
      ['PUT', `/api/adapters/${created.id}`, { name: 'Mine' }],
      ['DELETE', `/api/adapters/${created.id}`, undefined],
      ['POST', `/api/adapters/${created.id}/test`, undefined],
    ] as const) {
      expectError(await call(undefined, method, url, payload), 401, 'UNAUTHORIZED');
    }
  });

  it("hides another team's adapters (404, never the resource)", async () => {
    const created = await buildSmtpAdapter(ctx.app, owner, smtp.port, { name: 'Private' });
    const stranger = await setupOwner(ctx.app);
    for (const [method, url, payload] of [
      ['GET', `/api/adapters/${created.id}`, undefined],
      ['PUT', `/api/adapters/${created.id}`, { name: 'stolen', isDefault: true }],
      ['POST', `/api/adapters/${created.id}/test`, undefined],
      ['DELETE', `/api/adapters/${created.id}`, undefined],
    ] as const) {
      expectError(await call(stranger, method, url, payload), 404, 'NOT_FOUND');
    }
    const list = await call(stranger, 'GET', '/api/adapters');
    expect(list.json()).toEqual({ success: true, data: [] });
    const one = (await call(owner, 'GET', `/api/adapters/${created.id}`)).json().data;
    expect(one).toMatchObject({ name: 'Private', isActive: true });
  });
});
