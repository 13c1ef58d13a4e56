import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { createTestContext, type TestContext } from './helpers/app.ts';
import { sessionHeaders, setupOwner, type TeamOwner } from './helpers/auth.ts';
import { buildApiKey, buildTemplate, expectError, simpleDesign } from './helpers/factories.ts';

/**
 * Issue #8: deleting a template is its own API-key scope, `templates:delete`, as it is its own
 * permission for a session; `templates:write` creates and modifies only.
 */
describe('API key scope templates:delete', () => {
  let ctx: TestContext;
  let owner: TeamOwner;

  beforeAll(async () => {
    ctx = await createTestContext('postgres');
  });
  // Every case gets a team of its own (CONVENTIONS.md); the app and database are the file's.
  beforeEach(async () => {
    owner = await setupOwner(ctx.app);
  });
  afterAll(() => ctx?.close());

  const withKey = (key: string, method: 'GET' | 'POST' | 'PUT' | 'DELETE', url: string, payload?: object) =>
    ctx.app.inject({ method, url, headers: { 'x-api-key': key }, ...(payload ? { payload } : {}) });

  it('a templates:write key creates and updates templates but cannot delete one', async () => {
    const { key } = await buildApiKey(ctx.app, owner, { scopes: ['templates:write', 'templates:read'] });
    const created = await withKey(key, 'POST', '/api/templates', {
      name: 'Written by a key',
      subject: 'Hi',
      designJson: simpleDesign(),
    });
    expect(created.statusCode, created.body).toBe(201);
    const id = created.json().data.id;
    const updated = await withKey(key, 'PUT', `/api/templates/${id}`, { name: 'Renamed by a key' });
    expect(updated.statusCode, updated.body).toBe(200);

    const refused = expectError(await withKey(key, 'DELETE', `/api/templates/${id}`), 403, 'FORBIDDEN');
    expect(refused.details.requiredScopes).toEqual(['templates:delete']);
    const still = await withKey(key, 'GET', `/api/templates/${id}`);
    expect(still.statusCode, still.body).toBe(200);
    expect(still.json().data.name).toBe('Renamed by a key');
  });

  it('a templates:delete key deletes a template, and does nothing else', async () => {
    const template = await buildTemplate(ctx.app, owner, { name: 'To delete' });
    const { key } = await buildApiKey(ctx.app, owner, { scopes: ['templates:delete'] });
    expect((await buildApiKey(ctx.app, owner, { scopes: ['templates:delete'] })).scopes).toEqual([
      'templates:delete',
    ]);
    expectError(await withKey(key, 'PUT', `/api/templates/${template.id}`, { name: 'x' }), 403, 'FORBIDDEN');
    expectError(await withKey(key, 'GET', `/api/templates/${template.id}`), 403, 'FORBIDDEN');

    const removed = await withKey(key, 'DELETE', `/api/templates/${template.id}`);
    expect(removed.statusCode, removed.body).toBe(200);
    const gone = await ctx.app.inject({
      method: 'GET',
      url: `/api/templates/${template.id}`,
      headers: sessionHeaders(ctx.app, owner),
    });
    expectError(gone, 404, 'NOT_FOUND');
  });
});
