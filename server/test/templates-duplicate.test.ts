import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { SLUG_PATTERN } from '../src/slug.ts';
import { createTestContext, type TestContext } from './helpers/app.ts';
import { addTeamMember, setupOwner, type TeamOwner } from './helpers/auth.ts';
import {
  buildTemplate,
  dashboardCall,
  dataOf,
  expectError,
  simpleDesign,
  templateVersionsOf,
} from './helpers/factories.ts';

type Method = 'GET' | 'POST' | 'PUT' | 'DELETE';
type User = { cookie: string };

describe('template duplicate', () => {
  let ctx: TestContext;
  let owner: TeamOwner;
  const call = (user: User, method: Method, url: string, payload?: object) =>
    dashboardCall(ctx.app, user, method, url, payload);
  const data = dataOf;
  const duplicate = async (user: User, ref: string) =>
    data(await call(user, 'POST', `/api/templates/${ref}/duplicate`), 201);
  const getTemplate = async (user: User, ref: string) =>
    data(await call(user, 'GET', `/api/templates/${ref}`));
  const versionsOf = (user: User, ref: string) => templateVersionsOf(ctx.app, user, ref);

  beforeAll(async () => {
    ctx = await createTestContext('postgres');
  });
  // Every case gets a team of its own (CONVENTIONS.md); the app and database are the file's.
  beforeEach(async () => {
    owner = await setupOwner(ctx.app);
  });
  afterAll(async () => {
    await ctx?.close();
  });

  it('names copies "(Copy)" and slugs them -copy, -copy-2, -copy-3', async () => {
    const source = await buildTemplate(ctx.app, owner, { name: 'Welcome', slug: 'welcome' });
    const first = await duplicate(owner, source.id);
    expect(Object.keys(first).sort()).toEqual(['createdAt', 'id', 'name', 'slug']);
    expect(first).toMatchObject({
      id: expect.stringMatching(/^tpl_/),
      name: 'Welcome (Copy)',
      slug: 'welcome-copy',
      createdAt: expect.stringMatching(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/),
    });
    expect(first.id).not.toBe(source.id);
    const second = await duplicate(owner, 'welcome');
    expect(second).toMatchObject({ name: 'Welcome (Copy)', slug: 'welcome-copy-2' });
    const third = await duplicate(owner, source.id);
    expect(third.slug).toBe('welcome-copy-3');
    const ofCopy = await duplicate(owner, first.slug);
    expect(ofCopy).toMatchObject({ name: 'Welcome (Copy) (Copy)', slug: 'welcome-copy-copy' });
    const list = (await call(owner, 'GET', '/api/templates?search=welcome&pageSize=100')).json().data;
    expect(list.total).toBe(5);
  });

  it('keeps the name within 100 characters and the slug within 100 and valid', async () => {
    const source = await buildTemplate(ctx.app, owner, {
      name: `${'N'.repeat(95)} tail`,
      slug: `${'a'.repeat(89)}-bcdefghij`,
    });
    const copy = await duplicate(owner, source.id);
    expect(copy.name).toHaveLength(100);
    expect(copy.name).toBe(`${'N'.repeat(93)} (Copy)`);
    expect(copy.slug).toMatch(SLUG_PATTERN);
    expect(copy.slug.length).toBeLessThanOrEqual(100);
    expect(copy.slug).toBe(`${'a'.repeat(89)}-copy`);
    const again = await duplicate(owner, source.id);
    expect(again.slug).toBe(`${'a'.repeat(89)}-copy-2`);
    // The copy's slug is an ordinary slug: the template can be updated with it.
    const update = await call(owner, 'PUT', `/api/templates/${again.id}`, {
      slug: again.slug,
      name: again.name,
    });
    expect(update.statusCode, update.body).toBe(200);
  });

  it('copies content, description, isActive and PDF settings and gives the copy its own Version 1', async () => {
    const source = await buildTemplate(ctx.app, owner, {
      name: 'Invoice',
      description: 'Monthly invoice',
      subject: 'Invoice {{ invoice.number }}',
      designJson: simpleDesign('Dear {{ customer }}, please find your invoice attached.'),
      generatePdf: true,
      pdfFilename: 'invoice.pdf',
    });
    const off = await call(owner, 'PUT', `/api/templates/${source.id}`, { isActive: false });
    expect(off.statusCode, off.body).toBe(200);
    await data(await call(owner, 'POST', `/api/templates/${source.id}/versions`, { name: 'Second' }), 201);
    const original = await getTemplate(owner, source.id);
    const member = await addTeamMember(ctx.app, owner, 'member');

    const copy = await duplicate(member, source.id);
    const full = await getTemplate(owner, copy.id);
    const same = [
      'description',
      'subject',
      'designJson',
      'compiledHtml',
      'variables',
      'thumbnailUrl',
      'isActive',
      'generatePdf',
      'pdfFilename',
      'teamId',
    ] as const;
    for (const field of same) expect(full[field], field).toEqual(original[field]);
    expect(full).toMatchObject({
      name: 'Invoice (Copy)',
      slug: 'invoice-copy',
      isActive: false,
      generatePdf: true,
      pdfFilename: 'invoice.pdf',
      createdBy: member.userId,
    });
    const versions = await versionsOf(owner, copy.id);
    expect(versions).toEqual([
      {
        id: full.currentVersionId,
        name: 'Version 1',
        createdBy: member.userId,
        createdAt: expect.any(String),
      },
    ]);
    expect(full.currentVersionId).not.toBe(original.currentVersionId);
    // The source is untouched.
    expect(await getTemplate(owner, source.id)).toEqual(original);
    expect((await versionsOf(owner, source.id)).map((v: { name: string }) => v.name)).toEqual([
      'Second',
      'Version 1',
    ]);
  });

  it('answers 404 for unknown or foreign templates and 403 for viewers', async () => {
    const source = await buildTemplate(ctx.app, owner, { name: 'Guarded', slug: 'guarded' });
    const stranger = await setupOwner(ctx.app);
    expectError(await call(stranger, 'POST', `/api/templates/${source.id}/duplicate`), 404, 'NOT_FOUND');
    expectError(await call(stranger, 'POST', '/api/templates/guarded/duplicate'), 404, 'NOT_FOUND');
    expectError(await call(owner, 'POST', '/api/templates/no-such-template/duplicate'), 404, 'NOT_FOUND');
    const viewer = await addTeamMember(ctx.app, owner, 'viewer');
    expectError(await call(viewer, 'POST', `/api/templates/${source.id}/duplicate`), 403, 'FORBIDDEN');
    expectError(
      await ctx.app.inject({ method: 'POST', url: `/api/templates/${source.id}/duplicate` }),
      401,
      'UNAUTHORIZED',
    );
    const list = (await call(owner, 'GET', '/api/templates?search=guarded')).json().data;
    expect(list.total).toBe(1);
  });
});
