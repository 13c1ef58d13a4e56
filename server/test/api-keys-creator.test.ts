import { eq } from 'drizzle-orm';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { users } from '../src/db/schema/index.ts';
import { createTestContext, type TestContext } from './helpers/app.ts';
import { addTeamMember, sessionHeaders, setupOwner } from './helpers/auth.ts';
import { buildApiKey, expectError } from './helpers/factories.ts';

/**
 * Issue #8: a key keeps working after the member who created it leaves the team, so the key view
 * says who created it and whether they are still a member, and the list filters on it.
 */
describe('API key creators', () => {
  let ctx: TestContext;

  const list = async (as: { cookie: string }, query = '') => {
    const response = await ctx.app.inject({
      method: 'GET',
      url: `/api/api-keys${query}`,
      headers: sessionHeaders(ctx.app, as),
    });
    expect(response.statusCode, response.body).toBe(200);
    return response.json().data as Array<{ id: string; createdBy: string | null; creator: unknown }>;
  };
  const getOne = async (owner: { cookie: string }, id: string) => {
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
  });
  afterAll(() => ctx?.close());

  /** A team of the test's own: its owner and an admin, each with a key they created. */
  async function teamWithTwoCreators() {
    const owner = await setupOwner(ctx.app, { name: 'Olivia Owner' });
    const admin = await addTeamMember(ctx.app, owner, 'admin', { name: 'Adam Admin' });
    const ownersKey = await buildApiKey(ctx.app, owner, { name: 'by owner' });
    const adminsKey = await buildApiKey(ctx.app, admin, { name: 'by admin' });
    return { owner, admin, ownersKey, adminsKey };
  }

  it('shows each key’s creator as a member, then as removed once they leave; the key keeps working', async () => {
    const { owner, admin, ownersKey, adminsKey } = await teamWithTwoCreators();
    const keys = await list(owner);
    expect(keys.find((k) => k.id === adminsKey.id)).toMatchObject({
      createdBy: admin.userId,
      creator: { id: admin.userId, name: 'Adam Admin', email: admin.email, status: 'member' },
    });
    expect((await getOne(owner, ownersKey.id)).creator).toEqual({
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

    expect((await getOne(owner, adminsKey.id)).creator).toMatchObject({
      id: admin.userId,
      status: 'removed',
    });
    expect((await getOne(owner, ownersKey.id)).creator).toMatchObject({ status: 'member' });
    const used = await ctx.app.inject({
      method: 'GET',
      url: '/api/v1/eml_none/status',
      headers: { 'x-api-key': adminsKey.key },
    });
    expectError(used, 404, 'NOT_FOUND');

    // Owners find such keys by the creator's status or by the creator.
    expect(ids(await list(owner, '?creatorStatus=removed'))).toEqual([adminsKey.id]);
    expect(ids(await list(owner, '?creatorStatus=member'))).toEqual([ownersKey.id]);
    expect(ids(await list(owner, `?createdBy=${admin.userId}`))).toEqual([adminsKey.id]);
    expect(ids(await list(owner, `?createdBy=${admin.userId}&creatorStatus=member`))).toEqual([]);
    expect(ids(await list(owner, '?createdBy=usr_nobody'))).toEqual([]);
  });

  it('shows no creator once the user account is gone, and counts that key as removed', async () => {
    const { owner, ownersKey, adminsKey } = await teamWithTwoCreators();
    const leaver = await addTeamMember(ctx.app, owner, 'admin');
    const key = await buildApiKey(ctx.app, leaver, { name: 'orphan' });
    await ctx.app.ctx.database.db.delete(users).where(eq(users.id, leaver.userId));
    expect(await getOne(owner, key.id)).toMatchObject({ createdBy: null, creator: null });
    expect(ids(await list(owner, '?creatorStatus=removed'))).toEqual([key.id]);
    expect(ids(await list(owner, '?creatorStatus=member'))).toEqual(ids([ownersKey, adminsKey]));
  });

  it("filters only the caller's team and refuses unknown filter values", async () => {
    const { owner, admin, adminsKey } = await teamWithTwoCreators();
    const stranger = await setupOwner(ctx.app);
    await buildApiKey(ctx.app, stranger);
    expect(ids(await list(owner, `?createdBy=${admin.userId}`))).toEqual([adminsKey.id]);
    expect(await list(stranger, `?createdBy=${admin.userId}`)).toEqual([]);
    expect(await list(stranger, '?creatorStatus=removed')).toEqual([]);
    const bad = await ctx.app.inject({
      method: 'GET',
      url: '/api/api-keys?creatorStatus=gone',
      headers: sessionHeaders(ctx.app, owner),
    });
    expectError(bad, 400, 'VALIDATION_ERROR');
  });
});
