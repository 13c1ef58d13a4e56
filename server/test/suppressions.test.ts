import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { findSuppression } from '../src/modules/suppressions/index.ts';
import { createTestContext, type TestContext } from './helpers/app.ts';
import { setupOwner, type TeamOwner } from './helpers/auth.ts';
import { dashboardCall, dataOf, expectError } from './helpers/factories.ts';
import { type PoolStatements, recordPoolStatements } from './helpers/pool-statements.ts';

/** Issue #10: the team's suppression list and the worker's look-up of it. */
describe('suppressions', () => {
  let ctx: TestContext;
  let owner: TeamOwner;
  let stranger: TeamOwner;
  /** SQL texts the app sent through its pool since the last reset. */
  let statements: PoolStatements;

  beforeAll(async () => {
    ctx = await createTestContext('postgres');
    statements = recordPoolStatements(ctx.app.ctx.database.pool);
  });
  // Every case gets teams of its own (CONVENTIONS.md), so each sees only its own suppressions.
  beforeEach(async () => {
    owner = await setupOwner(ctx.app);
    stranger = await setupOwner(ctx.app);
  });
  afterAll(() => ctx?.close());

  const add = (user: TeamOwner, address: string, reason?: string) =>
    dashboardCall(ctx.app, user, 'POST', '/api/suppressions', { address, ...(reason ? { reason } : {}) });

  it('adds, lists (filtered by address), refuses duplicates and removes, per team', async () => {
    const first = await dataOf(await add(owner, 'Someone <Someone@EXAMPLE.test>', 'bounced'), 201);
    expect(first).toMatchObject({ address: 'someone@example.test', reason: 'bounced' });
    const second = await dataOf(await add(owner, 'other@example.test'), 201);
    expect(second.reason).toBe('manual');
    expectError(await add(owner, 'SOMEONE@example.test'), 409, 'ALREADY_EXISTS');
    expectError(await add(owner, 'not an address'), 400, 'VALIDATION_ERROR');
    // Another team has its own list.
    await dataOf(await add(stranger, 'someone@example.test', 'theirs'), 201);

    const list = await dataOf(await dashboardCall(ctx.app, owner, 'GET', '/api/suppressions'));
    expect(list.items.map((s: { address: string }) => s.address)).toEqual([
      'someone@example.test',
      'other@example.test',
    ]);
    expect(list.total).toBe(2);
    const one = await dataOf(
      await dashboardCall(ctx.app, owner, 'GET', '/api/suppressions?address=Someone%40example.test'),
    );
    expect(one.items).toEqual([first]);

    expectError(
      await dashboardCall(ctx.app, stranger, 'DELETE', `/api/suppressions/${first.id}`),
      404,
      'NOT_FOUND',
    );
    await dataOf(await dashboardCall(ctx.app, owner, 'DELETE', `/api/suppressions/${first.id}`));
    const after = await dataOf(await dashboardCall(ctx.app, owner, 'GET', '/api/suppressions'));
    expect(after.items.map((s: { id: string }) => s.id)).toEqual([second.id]);
  });

  it('finds a suppressed recipient of the team, and answers the look-ups of one tick with one query', async () => {
    await dataOf(await add(owner, 'lookup@example.test', 'complained'), 201);
    await dataOf(await add(stranger, 'theirs-only@example.test', 'bounced'), 201);
    const db = ctx.app.ctx.database.db;
    statements.clear();
    const found = await Promise.all([
      findSuppression(db, owner.teamId, ['clean@example.test', 'Look Up <LOOKUP@example.test>']),
      findSuppression(db, owner.teamId, ['clean@example.test']),
      findSuppression(db, owner.teamId, ['theirs-only@example.test']),
      findSuppression(db, stranger.teamId, ['theirs-only@example.test', 'lookup@example.test']),
      findSuppression(db, owner.teamId, []),
    ]);
    expect(found).toEqual([
      { address: 'lookup@example.test', reason: 'complained' },
      undefined,
      undefined,
      { address: 'theirs-only@example.test', reason: 'bounced' },
      undefined,
    ]);
    expect(statements.texts.filter((s) => s.includes('suppressions'))).toHaveLength(1);
  });
});
