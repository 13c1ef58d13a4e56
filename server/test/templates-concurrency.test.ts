import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { createTestContext, type TestContext } from './helpers/app.ts';
import { sessionHeaders, setupOwner, type TeamOwner } from './helpers/auth.ts';
import { buildApiKey, buildSmtpAdapter, buildTemplate, send, simpleDesign } from './helpers/factories.ts';
import { closedPort } from './helpers/smtp-server.ts';

/** Races that only concurrent connections can show. */
describe('templates under concurrency (PostgreSQL)', () => {
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

  const create = (name: string) =>
    ctx.app.inject({
      method: 'POST',
      url: '/api/templates',
      headers: sessionHeaders(ctx.app, owner),
      payload: { name, subject: 'Hi', designJson: simpleDesign('Hello') },
    });

  it('gives concurrent creates of one name distinct generated slugs', async () => {
    const responses = await Promise.all(Array.from({ length: 6 }, () => create('Race Welcome')));
    for (const response of responses) expect(response.statusCode, response.body).toBe(201);
    const slugs = responses.map((r) => r.json().data.slug).sort();
    expect(new Set(slugs).size).toBe(6);
    expect(slugs).toContain('race-welcome');
  });

  it('keeps both of two concurrent edits to different fields', async () => {
    const template = await buildTemplate(ctx.app, owner, { name: 'Edits' });
    const put = (payload: object) =>
      ctx.app.inject({
        method: 'PUT',
        url: `/api/templates/${template.id}`,
        headers: sessionHeaders(ctx.app, owner),
        payload,
      });
    const [a, b] = await Promise.all([
      put({ subject: 'New subject {{ first_name }}' }),
      put({ designJson: simpleDesign('New body {{ city }}') }),
    ]);
    expect(a.statusCode, a.body).toBe(200);
    expect(b.statusCode, b.body).toBe(200);
    const full = (
      await ctx.app.inject({
        method: 'GET',
        url: `/api/templates/${template.id}`,
        headers: sessionHeaders(ctx.app, owner),
      })
    ).json().data;
    expect(full.subject).toBe('New subject {{ first_name }}');
    expect(JSON.stringify(full.designJson)).toContain('New body {{ city }}');
    expect(full.variables).toEqual(expect.arrayContaining(['city', 'first_name']));
  });

  it('answers sends racing a delete with 202 or 400 INVALID_TEMPLATE, never 500', async () => {
    const key = (await buildApiKey(ctx.app, owner, { rateLimit: 1000 })).key;
    await buildSmtpAdapter(ctx.app, owner, await closedPort());
    const template = await buildTemplate(ctx.app, owner, { name: 'Doomed race' });
    const sends = Array.from({ length: 12 }, () =>
      send(ctx.app, key, { templateId: template.id, to: 'a@example.test' }),
    );
    const removal = ctx.app.inject({
      method: 'DELETE',
      url: `/api/templates/${template.id}`,
      headers: sessionHeaders(ctx.app, owner),
    });
    const responses = await Promise.all([...sends, removal]);
    const removed = responses.pop()!;
    expect(removed.statusCode, removed.body).toBe(200);
    for (const response of responses) {
      expect([202, 400], response.body).toContain(response.statusCode);
      if (response.statusCode === 400) expect(response.json().error.code).toBe('INVALID_TEMPLATE');
    }
  });
});
