import { sql } from 'drizzle-orm';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ADAPTER_SEND_CACHE_TTL_MS } from '../src/modules/adapters/index.ts';
import { TEMPLATE_SEND_CACHE_TTL_MS } from '../src/modules/templates/index.ts';
import { createTestContext, type TestContext } from './helpers/app.ts';
import {
  buildApiKey,
  buildTemplate,
  dashboardCall,
  expectError,
  send,
  simpleDesign,
} from './helpers/factories.ts';
import { type PoolStatements, recordPoolStatements } from './helpers/pool-statements.ts';
import { createTeamWithKey } from './helpers/sending-team.ts';

/**
 * Issue #9 "Cheap hot path": template and adapter resolution for sends cost no database round trip
 * while nothing changed; changes through this process are seen at once, changes made elsewhere
 * (another process, here: SQL behind the app's back) within the caches' bound.
 */
describe('send: template and adapter caches (PostgreSQL)', () => {
  let ctx: TestContext;
  /** SQL texts the app sent through its pool (outside transactions) since the last reset. */
  let statements: PoolStatements;

  beforeAll(async () => {
    ctx = await createTestContext('postgres');
    statements = recordPoolStatements(ctx.app.ctx.database.pool);
  });
  afterAll(() => ctx?.close());

  const reads = (table: string) => statements.texts.filter((s) => s.includes(`from "${table}"`)).length;
  const subjectOf = async (id: string) =>
    (
      (await ctx.app.ctx.database.db.execute(
        sql`select subject from email_logs where id = ${id}`,
      )) as unknown as { rows: { subject: string }[] }
    ).rows[0]?.subject;

  // Each case has its own team, so its adapter and templates start cold in this process's caches.
  it('reads the template and adapter once, then sends from the cache', async () => {
    const { key, template } = await createTeamWithKey(ctx.app, {
      template: { name: 'Cached', subject: 'First' },
    });
    statements.clear();
    const first = await send(ctx.app, key, { templateId: template.id, to: 'a@example.test' });
    expect(first.statusCode, first.body).toBe(202);
    expect(reads('templates')).toBe(1);
    expect(reads('template_versions')).toBe(1);
    expect(reads('adapters')).toBe(1);
    statements.clear();
    for (let i = 0; i < 3; i++) {
      const again = await send(ctx.app, key, { templateId: template.id, to: 'a@example.test' });
      expect(again.statusCode, again.body).toBe(202);
    }
    expect(reads('templates')).toBe(0);
    expect(reads('template_versions')).toBe(0);
    expect(reads('adapters')).toBe(0);
  });

  it('sees edits made through this process at once', async () => {
    const { owner, key, adapterId, template } = await createTeamWithKey(ctx.app, {
      template: { name: 'Edited here', subject: 'Before' },
    });
    const before = await send(ctx.app, key, { templateId: template.id, to: 'a@example.test' });
    expect(await subjectOf(before.json().data.id)).toBe('Before');
    const put = await dashboardCall(ctx.app, owner, 'PUT', `/api/templates/${template.id}`, {
      subject: 'After',
    });
    expect(put.statusCode, put.body).toBe(200);
    const after = await send(ctx.app, key, { templateId: template.id, to: 'a@example.test' });
    expect(await subjectOf(after.json().data.id)).toBe('After');

    await dashboardCall(ctx.app, owner, 'PUT', `/api/templates/${template.id}`, { isActive: false });
    expectError(
      await send(ctx.app, key, { templateId: template.id, to: 'a@example.test' }),
      400,
      'INVALID_TEMPLATE',
    );

    await dashboardCall(ctx.app, owner, 'PUT', `/api/adapters/${adapterId}`, { isActive: false });
    const cachedTemplate = await buildTemplate(ctx.app, owner, { name: 'Adapter check' });
    const refused = expectError(
      await send(ctx.app, key, { templateId: cachedTemplate.id, to: 'a@example.test' }),
      400,
      'VALIDATION_ERROR',
    );
    expect(refused.details.reason).toBe('NO_ACTIVE_ADAPTER');
    await dashboardCall(ctx.app, owner, 'PUT', `/api/adapters/${adapterId}`, { isActive: true });
    const back = await send(ctx.app, key, { templateId: cachedTemplate.id, to: 'a@example.test' });
    expect(back.statusCode, back.body).toBe(202);
  });

  it('sees changes made elsewhere within the bound', async () => {
    const { key, adapterId, template } = await createTeamWithKey(ctx.app, {
      template: { name: 'Edited elsewhere' },
    });
    const warm = await send(ctx.app, key, { templateId: template.id, to: 'a@example.test' });
    expect(warm.statusCode, warm.body).toBe(202);
    const db = ctx.app.ctx.database.db;
    await db.execute(sql`update templates set is_active = false where id = ${template.id}`);
    await db.execute(sql`update adapters set is_active = false where id = ${adapterId}`);
    const stale = await send(ctx.app, key, { templateId: template.id, to: 'a@example.test' });
    expect(stale.statusCode, stale.body).toBe(202);
    await new Promise((resolve) =>
      setTimeout(resolve, Math.max(TEMPLATE_SEND_CACHE_TTL_MS, ADAPTER_SEND_CACHE_TTL_MS) + 100),
    );
    expectError(
      await send(ctx.app, key, { templateId: template.id, to: 'a@example.test' }),
      400,
      'INVALID_TEMPLATE',
    );
    await db.execute(sql`update templates set is_active = true where id = ${template.id}`);
    const refused = expectError(
      await send(ctx.app, key, { templateId: template.id, to: 'a@example.test' }),
      400,
      'VALIDATION_ERROR',
    );
    expect(refused.details.reason).toBe('NO_ACTIVE_ADAPTER');
  });

  it('answers 401, not 500, for a team deleted elsewhere while its key and template are cached', async () => {
    // `postwright delete-user` deletes a user's own teams from another process (review finding,
    // session 19): the log's team foreign key refused the write, answered 500 until the caches forgot.
    const { key, template, owner } = await createTeamWithKey(ctx.app, { template: { name: 'Team gone' } });
    const secondTeam = await createTeamWithKey(ctx.app, { template: { name: 'Team gone too' } });
    const templatesKey = await buildApiKey(ctx.app, owner, { scopes: ['templates:write', 'templates:read'] });
    const listed = await ctx.app.inject({
      method: 'GET',
      url: '/api/templates',
      headers: { 'x-api-key': templatesKey.key },
    });
    expect(listed.statusCode, listed.body).toBe(200);
    const warm = await send(ctx.app, key, { templateId: template.id, to: 'a@example.test' });
    expect(warm.statusCode, warm.body).toBe(202);
    const warmBatch = await ctx.app.inject({
      method: 'POST',
      url: '/api/v1/send/batch',
      headers: { 'x-api-key': secondTeam.key },
      payload: { emails: [{ templateId: secondTeam.template.id, to: 'b@example.test' }] },
    });
    expect(warmBatch.statusCode, warmBatch.body).toBe(202);
    const db = ctx.app.ctx.database.db;
    await db.execute(sql`delete from teams where id in (${owner.teamId}, ${secondTeam.owner.teamId})`);

    expectError(
      await send(ctx.app, key, { templateId: template.id, to: 'a@example.test' }),
      401,
      'INVALID_TOKEN',
    );
    const batch = await ctx.app.inject({
      method: 'POST',
      url: '/api/v1/send/batch',
      headers: { 'x-api-key': secondTeam.key },
      payload: { emails: [{ templateId: secondTeam.template.id, to: 'b@example.test' }] },
    });
    expectError(batch, 401, 'INVALID_TOKEN');
    // Any other write with a team foreign key, through the error handler.
    const created = await ctx.app.inject({
      method: 'POST',
      url: '/api/templates',
      headers: { 'x-api-key': templatesKey.key },
      payload: {
        name: 'After the team',
        subject: 'Hi',
        designJson: simpleDesign(),
      },
    });
    expectError(created, 401, 'INVALID_TOKEN');
  });
});
