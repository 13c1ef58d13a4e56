import { eq } from 'drizzle-orm';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { users } from '../src/db/schema/index.ts';
import { createTestContext, type TestContext } from './helpers/app.ts';
import {
  addTeamMember,
  type SignedInUser,
  sessionHeaders,
  setupOwner,
  type TeamOwner,
} from './helpers/auth.ts';
import { buildApiKey, expectError } from './helpers/factories.ts';

/**
 * Issue #8: a key keeps working after the member who created it leaves the team, so the key view
 * says who created it and whether they are still a member, and the list filters on it.
 */
describe('API key creators', () => {
  let ctx: TestContext;
  let owner: TeamOwner;
  let admin: SignedInUser;
  let ownersKey: { id: string };
  let adminsKey: { id: string; key: string };

  const list = async (query = '', as: { cookie: string } = owner) => {
    const response = await ctx.app.inject({
      method: 'GET',
      url: `/api/api-keys${query}`,
      headers: sessionHeaders(ctx.app, as),
    });
    expect(response.statusCode, response.body).toBe(200);
    return response.json().data as Array<{ id: string; createdBy: string | null; creator: unknown }>;
  };
  const getOne = async (id: string) => {
    const response = await ctx.app.inject({
      method: 'GET',
      url: `/api/api-keys/${id}`,
      headers: sessionHeaders(ctx.app, owner),
    });
    expect(response.statusCode, response.body).toBe(200);
    return response.json().data;
  };
  const ids = (keys: Array<{ id: string }>) => keys.map((k) => k.id).sort();

  beforeAll(async () => {
    ctx = await createTestContext('postgres');
    owner = await setupOwner(ctx.app, { name: 'Olivia Owner' });
    admin = await addTeamMember(ctx.app, owner, 'admin', { name: 'Adam Admin' });
    ownersKey = await buildApiKey(ctx.app, owner, { name: 'by owner' });
    adminsKey = await buildApiKey(ctx.app, admin, { name: 'by admin' });
  });
  afterAll(() => ctx?.close());

  it('shows each key’s creator as a member, then as removed once they leave; the key keeps working', async () => {
    const keys = await list();
    expect(keys.find((k) => k.id === adminsKey.id)).toMatchObject({
      createdBy: admin.userId,
      creator: { id: admin.userId, name: 'Adam Admin', email: admin.email, status: 'member' },
    });
    expect((await getOne(ownersKey.id)).creator).toEqual({
      id: owner.userId,
      name: 'Olivia Owner',
      email: owner.email,
      status: 'member',
    });

    // The admin leaves: their key is marked, and keeps working.
    const removed = await ctx.app.inject({
      method: 'DELETE',
      url: `/api/team/members/${admin.userId}`,
      headers: sessionHeaders(ctx.app, owner),
    });
    expect(removed.statusCode, removed.body).toBe(200);

    expect((await getOne(adminsKey.id)).creator).toMatchObject({ id: admin.userId, status: 'removed' });
    expect((await getOne(ownersKey.id)).creator).toMatchObject({ status: 'member' });
    const used = await ctx.app.inject({
      method: 'GET',
      url: '/api/v1/eml_none/status',
      headers: { 'x-api-key': adminsKey.key },
    });
    expectError(used, 404, 'NOT_FOUND');

    // Owners find such keys by the creator's status or by the creator.
    expect(ids(await list('?creatorStatus=removed'))).toEqual([adminsKey.id]);
    expect(ids(await list('?creatorStatus=member'))).toEqual([ownersKey.id]);
    expect(ids(await list(`?createdBy=${admin.userId}`))).toEqual([adminsKey.id]);
    expect(ids(await list(`?createdBy=${admin.userId}&creatorStatus=member`))).toEqual([]);
    expect(ids(await list('?createdBy=usr_nobody'))).toEqual([]);
  });

  it('shows no creator once the user account is gone, and counts that key as removed', async () => {
    const leaver = await addTeamMember(ctx.app, owner, 'admin');
    const key = await buildApiKey(ctx.app, leaver, { name: 'orphan' });
    await ctx.app.ctx.database.db.delete(users).where(eq(users.id, leaver.userId));
    expect(await getOne(key.id)).toMatchObject({ createdBy: null, creator: null });
    expect(ids(await list('?creatorStatus=removed'))).toContain(key.id);
  });

  it("filters only the caller's team and refuses unknown filter values", async () => {
    const stranger = await setupOwner(ctx.app);
    await buildApiKey(ctx.app, stranger);
    expect(await list(`?createdBy=${admin.userId}`, stranger)).toEqual([]);
    expect(await list('?creatorStatus=removed', stranger)).toEqual([]);
    const bad = await ctx.app.inject({
      method: 'GET',
      url: '/api/api-keys?creatorStatus=gone',
      headers: sessionHeaders(ctx.app, owner),
    });
    expectError(bad, 400, 'VALIDATION_ERROR');
  });
});
