import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from 'vitest';
import { adapters, teams, webhooks } from '../src/db/schema/index.ts';
import { newId } from '../src/ids.ts';
import { adapterRepository } from '../src/modules/adapters/adapters.repository.ts';
import { webhookRepository } from '../src/modules/webhooks/webhooks.repository.ts';
import { createTestDatabase } from './helpers/database.ts';

/**
 * A webhook's and an adapter's `updatedAt` is the version workers keep them by (the dispatcher's
 * webhook rows, the provider cache): every change moves it forward, also two changes within one
 * millisecond (review finding, session 18: two contents under one version, and a worker kept the
 * older). Within one transaction `now()` does not move, and a frozen clock stands for two API
 * processes changing the row in the same millisecond.
 */
describe('row versions', () => {
  let database: Awaited<ReturnType<typeof createTestDatabase>>;
  const teamId = newId('team');
  beforeAll(async () => {
    database = await createTestDatabase('postgres');
    await database.handle.db
      .insert(teams)
      .values({ id: teamId, name: 'Versions', slug: `versions-${teamId}` });
  });
  afterEach(() => {
    vi.useRealTimers();
  });
  afterAll(() => database?.drop());

  const db = () => database.handle.db;

  it('moves a webhook’s updatedAt on each of two rotations and updates in one transaction', async () => {
    const id = newId('webhook');
    await db()
      .insert(webhooks)
      .values({
        id,
        teamId,
        name: 'w',
        url: 'https://receiver.example/hook',
        events: ['email.sent'],
        secretEncrypted: 'v2:one',
      });
    vi.useFakeTimers({ toFake: ['Date'] });
    vi.setSystemTime(new Date('2030-01-01T00:00:00.000Z'));
    const versions = await db().transaction(async (tx) => [
      (await webhookRepository.rotateSecret(tx, teamId, id, 'v2:two', new Date(Date.now() + 1000)))!
        .updatedAt,
      (await webhookRepository.rotateSecret(tx, teamId, id, 'v2:three', new Date(Date.now() + 1000)))!
        .updatedAt,
      (await webhookRepository.update(tx, teamId, id, { name: 'renamed' }))!.updatedAt,
      (await webhookRepository.update(tx, teamId, id, { name: 'renamed again' }))!.updatedAt,
    ]);
    const times = versions.map((version) => version.getTime());
    expect(new Set(times).size).toBe(4);
    expect([...times].sort((a, b) => a - b)).toEqual(times);
  });

  it('moves an adapter’s updatedAt on each of two updates in the same millisecond', async () => {
    const id = newId('adapter');
    await db().insert(adapters).values({ id, teamId, name: 'a', type: 'smtp', configEncrypted: 'v2:x' });
    vi.useFakeTimers({ toFake: ['Date'] });
    vi.setSystemTime(new Date('2030-01-01T00:00:00.000Z'));
    const first = (await adapterRepository.update(db(), teamId, id, { name: 'b' }))!.updatedAt;
    const second = (await adapterRepository.update(db(), teamId, id, { name: 'c' }))!.updatedAt;
    expect(second.getTime()).toBeGreaterThan(first.getTime());
  });
});
