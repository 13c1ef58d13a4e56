import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { createTestContext, type TestContext } from './helpers/app.ts';
import { addTeamMember, sessionHeaders, setupOwner, type TeamOwner } from './helpers/auth.ts';
import {
  buildApiKey,
  buildSmtpAdapter,
  buildTemplate,
  expectError,
  fixtureNames,
  loadFixture,
  send,
  simpleDesign,
} from './helpers/factories.ts';
import { startTestSmtpServer, type TestSmtpServer } from './helpers/smtp-server.ts';

type Method = 'GET' | 'POST' | 'PUT' | 'DELETE';

const LIST_ITEM_KEYS = [
  'createdAt',
  'description',
  'generatePdf',
  'id',
  'isActive',
  'name',
  'slug',
  'subject',
  'thumbnailUrl',
  'updatedAt',
  'variables',
];

describe('templates', () => {
  let ctx: TestContext;
  let owner: TeamOwner;
  let smtp: TestSmtpServer;
  const call = (user: { cookie: string }, method: Method, url: string, payload?: object) =>
    ctx.app.inject({ method, url, headers: sessionHeaders(ctx.app, user), ...(payload ? { payload } : {}) });
  const create = (user: { cookie: string }, body: Record<string, unknown>) =>
    call(user, 'POST', '/api/templates', { subject: 'Hello', designJson: simpleDesign(), ...body });
  const getData = async (user: { cookie: string }, idOrSlug: string) => {
    const response = await call(user, 'GET', `/api/templates/${idOrSlug}`);
    expect(response.statusCode, response.body).toBe(200);
    expect(response.json().success).toBe(true);
    return response.json().data;
  };
  const logOf = async (id: string) => {
    const response = await call(owner, 'GET', `/api/logs/${id}`);
    expect(response.statusCode, response.body).toBe(200);
    return response.json().data;
  };

  beforeAll(async () => {
    ctx = await createTestContext('postgres');
    smtp = await startTestSmtpServer();
  });
  // Every case gets a team of its own (CONVENTIONS.md); the app and database are the file's.
  beforeEach(async () => {
    owner = await setupOwner(ctx.app);
  });
  afterAll(async () => {
    await ctx?.close();
    await smtp?.close();
  });

  it('creates with a generated slug, numbers a repeated one and refuses a taken or malformed slug', async () => {
    const team = await setupOwner(ctx.app);
    const first = await create(team, { name: 'Welcome Email!' });
    expect(first.statusCode, first.body).toBe(201);
    expect(first.json().success).toBe(true);
    expect(Object.keys(first.json().data).sort()).toEqual(
      ['createdAt', 'id', 'isActive', 'name', 'slug', 'subject'].sort(),
    );
    expect(first.json().data).toMatchObject({
      id: expect.stringMatching(/^tpl_/),
      name: 'Welcome Email!',
      slug: 'welcome-email',
      subject: 'Hello',
      isActive: true,
      createdAt: expect.stringMatching(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/),
    });
    const again = await buildTemplate(ctx.app, team, { name: 'Welcome Email!' });
    expect(again.slug).toBe('welcome-email-2');
    expect(again.id).not.toBe(first.json().data.id);
    const taken = expectError(
      await create(team, { name: 'Other', slug: 'welcome-email' }),
      409,
      'ALREADY_EXISTS',
    );
    expect(taken.message).toContain('welcome-email');
    const bad = expectError(await create(team, { name: 'Other', slug: 'Bad Slug' }), 400, 'VALIDATION_ERROR');
    expect(bad.details.issues[0].path).toBe('body.slug');
    const list = (await call(team, 'GET', '/api/templates')).json().data;
    expect(list.total).toBe(2);
  });

  it('gets the full template by id and by slug', async () => {
    const created = await buildTemplate(ctx.app, owner, {
      name: 'Full view',
      subject: 'Hi {{ first_name }}',
      designJson: simpleDesign('Welcome to {{ company.name }}'),
    });
    const byId = await getData(owner, created.id);
    expect(byId).toMatchObject({
      id: created.id,
      teamId: owner.teamId,
      name: 'Full view',
      slug: created.slug,
      subject: 'Hi {{ first_name }}',
      description: '',
      isActive: true,
      generatePdf: false,
      pdfFilename: null,
      createdBy: owner.userId,
      currentVersionId: expect.stringMatching(/^ver_/),
      designJson: simpleDesign('Welcome to {{ company.name }}'),
    });
    expect(byId.compiledHtml).toMatch(/<html[\s>]/i);
    expect(byId.compiledHtml).toContain('Welcome to');
    expect(byId.variables).toEqual(expect.arrayContaining(['first_name', 'company.name']));
    expect(byId.variables).toHaveLength(2);
    expect(byId.variables).toEqual([...byId.variables].sort());
    expect(await getData(owner, created.slug)).toEqual(byId);
    expectError(await call(owner, 'GET', '/api/templates/no-such-slug'), 404, 'NOT_FOUND');
    expectError(await call(owner, 'GET', '/api/templates/tpl_01h455vb4pex5vsknk084sn02q'), 404, 'NOT_FOUND');
  });

  it('lists with pagination, exact list keys, search and the isActive filter', async () => {
    const team = await setupOwner(ctx.app);
    const a = await buildTemplate(ctx.app, team, { name: 'Welcome Aboard' });
    const b = await buildTemplate(ctx.app, team, { name: 'Password reset', slug: 'pw-reset' });
    const c = await buildTemplate(ctx.app, team, { name: 'Invoice' });
    const page1 = await call(team, 'GET', '/api/templates?pageSize=2');
    expect(page1.statusCode, page1.body).toBe(200);
    expect(page1.json().success).toBe(true);
    const data1 = page1.json().data;
    expect(data1).toMatchObject({ total: 3, page: 1, pageSize: 2, totalPages: 2 });
    expect(data1.items).toHaveLength(2);
    for (const item of data1.items) expect(Object.keys(item).sort()).toEqual(LIST_ITEM_KEYS);
    const data2 = (await call(team, 'GET', '/api/templates?pageSize=2&page=2')).json().data;
    expect(data2).toMatchObject({ total: 3, page: 2, pageSize: 2, totalPages: 2 });
    expect(data2.items).toHaveLength(1);
    const allIds = [...data1.items, ...data2.items].map((t: { id: string }) => t.id).sort();
    expect(allIds).toEqual([a.id, b.id, c.id].sort());

    const search = async (term: string) =>
      (await call(team, 'GET', `/api/templates?search=${encodeURIComponent(term)}`))
        .json()
        .data.items.map((t: { id: string }) => t.id);
    expect(await search('WELCOME')).toEqual([a.id]);
    expect(await search('PW-RES')).toEqual([b.id]);
    expect(await search('%')).toEqual([]);

    const off = await call(team, 'PUT', `/api/templates/${c.id}`, { isActive: false });
    expect(off.statusCode, off.body).toBe(200);
    const inactive = (await call(team, 'GET', '/api/templates?isActive=false')).json().data;
    expect(inactive.items.map((t: { id: string }) => t.id)).toEqual([c.id]);
    expect(inactive.total).toBe(1);
    const active = (await call(team, 'GET', '/api/templates?isActive=true')).json().data;
    expect(active.items.map((t: { id: string }) => t.id).sort()).toEqual([a.id, b.id].sort());

    for (const query of ['pageSize=101', 'page=0', 'pageSize=0', 'isActive=maybe']) {
      expectError(await call(team, 'GET', `/api/templates?${query}`), 400, 'VALIDATION_ERROR');
    }
  });

  it('refuses a broken design or subject with INVALID_TEMPLATE naming the spot, and long fields', async () => {
    const invalid = async (body: Record<string, unknown>) => {
      const error = expectError(await create(owner, { name: 'Broken', ...body }), 400, 'INVALID_TEMPLATE');
      return error.details.issues[0].path as string;
    };
    const { root: _root, ...noRoot } = simpleDesign();
    expect(await invalid({ designJson: noRoot })).toBe('root');
    const unknownType = simpleDesign();
    unknownType.b1!.type = 'Marquee';
    expect(await invalid({ designJson: unknownType })).toMatch(/^b1\b/);
    const dangling = simpleDesign();
    (dangling.root!.data.childrenIds as string[]).push('ghost');
    expect(await invalid({ designJson: dangling })).toMatch(/^root\.data\.childrenIds/);
    expect(await invalid({ subject: 'Hi {{ name' })).toBe('subject');
    expectError(await create(owner, { name: 'x'.repeat(101) }), 400, 'VALIDATION_ERROR');
    expectError(await create(owner, { name: 'Long', description: 'd'.repeat(501) }), 400, 'VALIDATION_ERROR');
    const ok = await create(owner, { name: 'y'.repeat(100), description: 'd'.repeat(500) });
    expect(ok.statusCode, ok.body).toBe(201);
    const list = (await call(owner, 'GET', '/api/templates?search=Broken')).json().data;
    expect(list.total).toBe(0);
  });

  it('updates by id and by slug, recomputing variables and HTML when the design changes', async () => {
    const created = await buildTemplate(ctx.app, owner, { name: 'Editable', slug: 'editable' });
    const before = await getData(owner, created.id);
    const byId = await call(owner, 'PUT', `/api/templates/${created.id}`, {
      name: 'Edited',
      subject: 'Order {{ order.number }}',
      designJson: simpleDesign('Thanks {{ customer }}, your total is {{ total }}'),
    });
    expect(byId.statusCode, byId.body).toBe(200);
    expect(byId.json()).toEqual({
      success: true,
      data: {
        id: created.id,
        name: 'Edited',
        subject: 'Order {{ order.number }}',
        isActive: true,
        updatedAt: expect.stringMatching(/Z$/),
      },
    });
    const after = await getData(owner, created.id);
    expect([...after.variables].sort()).toEqual(['customer', 'order.number', 'total']);
    expect(after.compiledHtml).not.toBe(before.compiledHtml);
    expect(after.compiledHtml).toContain('your total is');
    const bySlug = await call(owner, 'PUT', '/api/templates/editable', {
      isActive: false,
      description: 'now off',
    });
    expect(bySlug.statusCode, bySlug.body).toBe(200);
    expect(Object.keys(bySlug.json().data).sort()).toEqual([
      'id',
      'isActive',
      'name',
      'subject',
      'updatedAt',
    ]);
    expect(bySlug.json().data).toMatchObject({ id: created.id, isActive: false, name: 'Edited' });
    expect(await getData(owner, 'editable')).toMatchObject({ isActive: false, description: 'now off' });
    expectError(
      await call(owner, 'PUT', `/api/templates/${created.id}`, { subject: 'Hi {{ name' }),
      400,
      'INVALID_TEMPLATE',
    );
    expect((await getData(owner, created.id)).subject).toBe('Order {{ order.number }}');
    await buildTemplate(ctx.app, owner, { name: 'Neighbour', slug: 'neighbour' });
    expectError(
      await call(owner, 'PUT', '/api/templates/editable', { slug: 'neighbour' }),
      409,
      'ALREADY_EXISTS',
    );
    expectError(
      await call(owner, 'PUT', '/api/templates/editable', { slug: 'Bad Slug' }),
      400,
      'VALIDATION_ERROR',
    );
    const renamed = await call(owner, 'PUT', '/api/templates/editable', { slug: 'edited' });
    expect(renamed.statusCode, renamed.body).toBe(200);
    expect((await getData(owner, 'edited')).id).toBe(created.id);
    expectError(await call(owner, 'GET', '/api/templates/editable'), 404, 'NOT_FOUND');
  });

  describe('with sends', () => {
    let key: string;
    beforeEach(async () => {
      key = (await buildApiKey(ctx.app, owner)).key;
      await buildSmtpAdapter(ctx.app, owner, smtp.port);
    });
    const sendWith = async (templateId: string) => {
      const response = await send(ctx.app, key, {
        templateId,
        to: 'reader@example.test',
        variables: { first_name: 'Ada' },
      });
      expect(response.statusCode, response.body).toBe(202);
      return response.json().data.id as string;
    };

    it('deletes a template; its logs keep templateName and lose templateId', async () => {
      const created = await buildTemplate(ctx.app, owner, { name: 'Short-lived' });
      const emailId = await sendWith(created.id);
      expect(await logOf(emailId)).toMatchObject({ templateId: created.id, templateName: 'Short-lived' });
      const removed = await call(owner, 'DELETE', `/api/templates/${created.id}`);
      expect(removed.statusCode, removed.body).toBe(200);
      expect(removed.json()).toEqual({ success: true });
      expectError(await call(owner, 'GET', `/api/templates/${created.id}`), 404, 'NOT_FOUND');
      expectError(await call(owner, 'GET', `/api/templates/${created.slug}`), 404, 'NOT_FOUND');
      expectError(await call(owner, 'DELETE', `/api/templates/${created.id}`), 404, 'NOT_FOUND');
      const log = await logOf(emailId);
      expect(log.templateId).toBeNull();
      expect(log.templateName).toBe('Short-lived');
      expect(log.templateVersionId).toMatch(/^ver_/);
    });

    it('pins each send to the version current at send time', async () => {
      const created = await buildTemplate(ctx.app, owner, {
        name: 'Versioned',
        subject: 'First {{ first_name }}',
      });
      const version1 = (await getData(owner, created.id)).currentVersionId;
      const firstLog = await logOf(await sendWith(created.id));
      expect(firstLog.templateVersionId).toBe(version1);
      expect(firstLog.subject).toBe('First Ada');
      const updated = await call(owner, 'PUT', `/api/templates/${created.id}`, {
        subject: 'Second {{ first_name }}',
      });
      expect(updated.statusCode, updated.body).toBe(200);
      const secondLog = await logOf(await sendWith(created.slug));
      expect(secondLog.templateVersionId).toMatch(/^ver_/);
      expect(secondLog.templateVersionId).not.toBe(firstLog.templateVersionId);
      expect(secondLog.subject).toBe('Second Ada');
      expect((await getData(owner, created.id)).currentVersionId).toBe(secondLog.templateVersionId);
      const thirdLog = await logOf(await sendWith(created.id));
      expect(thirdLog.templateVersionId).toBe(secondLog.templateVersionId);
    });
  });

  it.each(fixtureNames())('accepts the %s fixture as designJson', async (fixture) => {
    const created = await create(owner, { name: `Fixture ${fixture}`, designJson: loadFixture(fixture) });
    expect(created.statusCode, created.body).toBe(201);
    const full = await getData(owner, created.json().data.id);
    expect(full.designJson).toEqual(loadFixture(fixture));
    expect(full.compiledHtml.length).toBeGreaterThan(500);
  });

  it('applies the role matrix: viewers read, members create and update, only admins delete', async () => {
    const created = await buildTemplate(ctx.app, owner, { name: 'Roles' });
    const member = await addTeamMember(ctx.app, owner, 'member');
    const viewer = await addTeamMember(ctx.app, owner, 'viewer');

    expect((await call(viewer, 'GET', '/api/templates')).json().data.total).toBeGreaterThan(0);
    expect((await getData(viewer, created.slug)).id).toBe(created.id);
    expectError(await create(viewer, { name: 'By viewer' }), 403, 'FORBIDDEN');
    expectError(await call(viewer, 'PUT', `/api/templates/${created.id}`, { name: 'V' }), 403, 'FORBIDDEN');
    expectError(await call(viewer, 'DELETE', `/api/templates/${created.id}`), 403, 'FORBIDDEN');

    const byMember = await create(member, { name: 'By member' });
    expect(byMember.statusCode, byMember.body).toBe(201);
    expect((await getData(owner, byMember.json().data.id)).createdBy).toBe(member.userId);
    const edit = await call(member, 'PUT', `/api/templates/${created.id}`, { name: 'Edited by member' });
    expect(edit.statusCode, edit.body).toBe(200);
    expectError(await call(member, 'DELETE', `/api/templates/${created.id}`), 403, 'FORBIDDEN');
    expect((await getData(owner, created.id)).name).toBe('Edited by member');

    expectError(await ctx.app.inject({ method: 'GET', url: '/api/templates' }), 401, 'UNAUTHORIZED');
  });

  it("hides another team's templates (404 by id and by slug, empty list)", async () => {
    const created = await buildTemplate(ctx.app, owner, { name: 'Secret plans', slug: 'secret-plans' });
    const stranger = await setupOwner(ctx.app);
    for (const ref of [created.id, 'secret-plans']) {
      expectError(await call(stranger, 'GET', `/api/templates/${ref}`), 404, 'NOT_FOUND');
      expectError(await call(stranger, 'PUT', `/api/templates/${ref}`, { name: 'Mine' }), 404, 'NOT_FOUND');
      expectError(await call(stranger, 'DELETE', `/api/templates/${ref}`), 404, 'NOT_FOUND');
    }
    const list = await call(stranger, 'GET', '/api/templates?search=secret');
    expect(list.json()).toEqual({
      success: true,
      data: { items: [], total: 0, page: 1, pageSize: 20, totalPages: 0 },
    });
    expect(await getData(owner, 'secret-plans')).toMatchObject({ id: created.id, name: 'Secret plans' });
    // The stranger may use the same slug in their own team.
    expect((await buildTemplate(ctx.app, stranger, { name: 'Mine', slug: 'secret-plans' })).slug).toBe(
      'secret-plans',
    );
  });
});
