import { eq } from 'drizzle-orm';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { apiKeys } from '../src/db/schema/index.ts';
import { createTestContext, type TestContext } from './helpers/app.ts';
import { addTeamMember, sessionHeaders, setupOwner, type TeamOwner } from './helpers/auth.ts';
import { buildApiKey, expectError } from './helpers/factories.ts';

describe('API keys', () => {
  let ctx: TestContext;
  let owner: TeamOwner;
  const statusOf = (key: string | undefined, id = 'eml_none') =>
    ctx.app.inject({
      method: 'GET',
      url: `/api/v1/${id}/status`,
      headers: key === undefined ? {} : { 'x-api-key': key },
    });

  beforeAll(async () => {
    ctx = await createTestContext('postgres');
  });
  // Every case gets a team of its own (CONVENTIONS.md); the app and database are the file's.
  beforeEach(async () => {
    owner = await setupOwner(ctx.app);
  });
  afterAll(() => ctx?.close());

  it('creates a key with the defaults and shows the secret only once', async () => {
    const created = await buildApiKey(ctx.app, owner, { name: 'Production' });
    expect(created.key).toMatch(/^svc_[0-9A-Za-z]{32}$/);
    expect(created).toMatchObject({
      id: expect.stringMatching(/^key_/),
      name: 'Production',
      keyPrefix: created.key.slice(0, 12),
      scopes: ['send'],
      rateLimit: 100,
      expiresAt: null,
      isActive: true,
      createdBy: owner.userId,
    });
    const list = await ctx.app.inject({
      method: 'GET',
      url: '/api/api-keys',
      headers: sessionHeaders(ctx.app, owner),
    });
    expect(list.json().data.map((k: { id: string }) => k.id)).toEqual([created.id]); // the team's only key
    const listed = list.json().data.find((k: { id: string }) => k.id === created.id);
    expect(listed).toMatchObject({ keyPrefix: created.keyPrefix, lastUsedAt: null });
    expect(listed).not.toHaveProperty('key');
    expect(JSON.stringify(list.json())).not.toContain(created.key);
    const one = await ctx.app.inject({
      method: 'GET',
      url: `/api/api-keys/${created.id}`,
      headers: sessionHeaders(ctx.app, owner),
    });
    expect(one.json().data).not.toHaveProperty('key');
    const [row] = await ctx.app.ctx.database.db.select().from(apiKeys).where(eq(apiKeys.id, created.id));
    expect(row?.keyHash).toMatch(/^[0-9a-f]{64}$/);
    expect(JSON.stringify(row)).not.toContain(created.key);
  });

  it('updates name, scopes, rateLimit and isActive, and deletes permanently', async () => {
    const created = await buildApiKey(ctx.app, owner);
    const updated = await ctx.app.inject({
      method: 'PUT',
      url: `/api/api-keys/${created.id}`,
      headers: sessionHeaders(ctx.app, owner),
      payload: { name: 'Renamed', scopes: ['send', 'logs:read'], rateLimit: 5, isActive: false },
    });
    expect(updated.statusCode, updated.body).toBe(200);
    expect(updated.json().data).toEqual({
      id: created.id,
      name: 'Renamed',
      keyPrefix: created.keyPrefix,
      scopes: ['send', 'logs:read'],
      rateLimit: 5,
      isActive: false,
      updatedAt: expect.any(String),
    });
    expectError(await statusOf(created.key), 401, 'INVALID_TOKEN');
    const removed = await ctx.app.inject({
      method: 'DELETE',
      url: `/api/api-keys/${created.id}`,
      headers: sessionHeaders(ctx.app, owner),
    });
    expect(removed.json()).toEqual({ success: true });
    const gone = await ctx.app.inject({
      method: 'GET',
      url: `/api/api-keys/${created.id}`,
      headers: sessionHeaders(ctx.app, owner),
    });
    expectError(gone, 404, 'NOT_FOUND');
  });

  it('regenerate keeps the record and makes the old secret fail at once', async () => {
    const created = await buildApiKey(ctx.app, owner);
    expectError(await statusOf(created.key), 404, 'NOT_FOUND');
    const regenerated = await ctx.app.inject({
      method: 'POST',
      url: `/api/api-keys/${created.id}/regenerate`,
      headers: sessionHeaders(ctx.app, owner),
    });
    expect(regenerated.statusCode, regenerated.body).toBe(200);
    const data = regenerated.json().data;
    expect(data.id).toBe(created.id);
    expect(data.key).not.toBe(created.key);
    expect(data.keyPrefix).toBe(data.key.slice(0, 12));
    expectError(await statusOf(created.key), 401, 'INVALID_TOKEN');
    expectError(await statusOf(data.key), 404, 'NOT_FOUND');
  });

  it('refuses missing, unknown and expired keys with the spec codes', async () => {
    expectError(await statusOf(undefined), 401, 'UNAUTHORIZED');
    expectError(await statusOf('svc_unknownunknownunknownunknown12'), 401, 'INVALID_TOKEN');
    expectError(await statusOf('not-even-a-key'), 401, 'INVALID_TOKEN');
    const expiresAt = Date.now() + 1_000;
    const created = await buildApiKey(ctx.app, owner, { expiresAt: new Date(expiresAt).toISOString() });
    expectError(await statusOf(created.key), 404, 'NOT_FOUND');
    // The key is now in the process's key cache: expiry is still checked on every request.
    await new Promise((resolve) => setTimeout(resolve, expiresAt - Date.now() + 50));
    const error = expectError(await statusOf(created.key), 401, 'TOKEN_EXPIRED');
    expect(error.details.expiresAt).toEqual(expect.any(String));
  });

  it('refuses an expiresAt in the past at creation', async () => {
    const response = await ctx.app.inject({
      method: 'POST',
      url: '/api/api-keys',
      headers: sessionHeaders(ctx.app, owner),
      payload: { name: 'old', expiresAt: '2020-01-01T00:00:00.000Z' },
    });
    expectError(response, 400, 'VALIDATION_ERROR');
  });

  it('records lastUsedAt when a key is used', async () => {
    const created = await buildApiKey(ctx.app, owner);
    await statusOf(created.key);
    const one = await ctx.app.inject({
      method: 'GET',
      url: `/api/api-keys/${created.id}`,
      headers: sessionHeaders(ctx.app, owner),
    });
    const lastUsedAt = one.json().data.lastUsedAt;
    expect(Date.now() - Date.parse(lastUsedAt)).toBeLessThan(60_000);
  });

  it('enforces scopes: a logs:read key reads status but cannot send', async () => {
    const created = await buildApiKey(ctx.app, owner, { scopes: ['logs:read'] });
    expectError(await statusOf(created.key), 404, 'NOT_FOUND');
    const sendResponse = await ctx.app.inject({
      method: 'POST',
      url: '/api/v1/send',
      headers: { 'x-api-key': created.key },
      payload: { templateId: 'x', to: 'a@b.co' },
    });
    expectError(sendResponse, 403, 'FORBIDDEN');
  });

  it('enforces the per-minute limit with RateLimit headers and 429 RATE_LIMITED', async () => {
    const created = await buildApiKey(ctx.app, owner, { rateLimit: 3 });
    for (const remaining of [2, 1, 0]) {
      const response = await statusOf(created.key);
      expect(response.statusCode).toBe(404);
      expect(response.headers['ratelimit-limit']).toBe('3');
      expect(response.headers['ratelimit-remaining']).toBe(String(remaining));
      expect(Number(response.headers['ratelimit-reset'])).toBeGreaterThan(0);
    }
    const limited = await statusOf(created.key);
    const error = expectError(limited, 429, 'RATE_LIMITED');
    expect(error.details.limit).toBe(3);
    expect(Number(limited.headers['retry-after'])).toBeGreaterThan(0);
    expect(Number(limited.headers['retry-after'])).toBeLessThanOrEqual(60);
    // Another key of the same team has its own budget.
    const other = await buildApiKey(ctx.app, owner, { rateLimit: 3 });
    expect((await statusOf(other.key)).statusCode).toBe(404);
  });

  it('applies the role matrix: members view keys, viewers do not, only admins create', async () => {
    const member = await addTeamMember(ctx.app, owner, 'member');
    const viewer = await addTeamMember(ctx.app, owner, 'viewer');
    const list = (user: { cookie: string }) =>
      ctx.app.inject({ method: 'GET', url: '/api/api-keys', headers: sessionHeaders(ctx.app, user) });
    expect((await list(member)).statusCode).toBe(200);
    expectError(await list(viewer), 403, 'FORBIDDEN');
    const create = await ctx.app.inject({
      method: 'POST',
      url: '/api/api-keys',
      headers: sessionHeaders(ctx.app, member),
      payload: { name: 'nope' },
    });
    expectError(create, 403, 'FORBIDDEN');
    expectError(await ctx.app.inject({ method: 'GET', url: '/api/api-keys' }), 401, 'UNAUTHORIZED');
  });

  it("hides another team's keys (404, never the resource)", async () => {
    const created = await buildApiKey(ctx.app, owner, { name: 'Mine' });
    const stranger = await setupOwner(ctx.app);
    for (const [method, url] of [
      ['GET', `/api/api-keys/${created.id}`],
      ['PUT', `/api/api-keys/${created.id}`],
      ['DELETE', `/api/api-keys/${created.id}`],
      ['POST', `/api/api-keys/${created.id}/regenerate`],
    ] as const) {
      const response = await ctx.app.inject({
        method,
        url,
        headers: sessionHeaders(ctx.app, stranger),
        ...(method === 'PUT' ? { payload: { name: 'stolen' } } : {}),
      });
      expectError(response, 404, 'NOT_FOUND');
    }
    const list = await ctx.app.inject({
      method: 'GET',
      url: '/api/api-keys',
      headers: sessionHeaders(ctx.app, stranger),
    });
    expect(list.json().data).toEqual([]);
    // None of the stranger's attempts did anything: the key keeps its name and its secret works.
    const mine = await ctx.app.inject({
      method: 'GET',
      url: `/api/api-keys/${created.id}`,
      headers: sessionHeaders(ctx.app, owner),
    });
    expect(mine.statusCode, mine.body).toBe(200);
    expect(mine.json().data.name).toBe('Mine');
    expectError(await statusOf(created.key, 'eml_x'), 404, 'NOT_FOUND');
  });
});
