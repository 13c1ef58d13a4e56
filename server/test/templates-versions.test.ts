import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { createTestContext, type TestContext } from './helpers/app.ts';
import { addTeamMember, setupOwner, type TeamOwner } from './helpers/auth.ts';
import {
  buildTemplate,
  dashboardCall,
  dataOf,
  expectError,
  restoreTemplateVersion,
  simpleDesign,
  templateVersionsOf,
} from './helpers/factories.ts';

type Method = 'GET' | 'POST' | 'PUT' | 'DELETE';
type User = { cookie: string };

const VERSION_KEYS = ['createdAt', 'createdBy', 'id', 'name'];
const UNKNOWN_VERSION = 'ver_01h455vb4pex5vsknk084sn02q';

describe('template versions', () => {
  let ctx: TestContext;
  let owner: TeamOwner;
  const call = (user: User, method: Method, url: string, payload?: object) =>
    dashboardCall(ctx.app, user, method, url, payload);
  const data = dataOf;
  const getTemplate = async (user: User, ref: string) =>
    data(await call(user, 'GET', `/api/templates/${ref}`));
  const versionsOf = (user: User, ref: string) => templateVersionsOf(ctx.app, user, ref);
  const restore = (user: User, ref: string, versionId: string) =>
    restoreTemplateVersion(ctx.app, user, ref, versionId);

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

  it('lists versions newest first and creates them with and without a name', async () => {
    const created = await buildTemplate(ctx.app, owner, { name: 'Numbered', slug: 'numbered' });
    const initial = await versionsOf(owner, created.id);
    expect(initial).toEqual([
      {
        id: expect.stringMatching(/^ver_/),
        name: 'Version 1',
        createdBy: owner.userId,
        createdAt: expect.any(String),
      },
    ]);
    expect((await getTemplate(owner, created.id)).currentVersionId).toBe(initial[0].id);

    const auto = await data(await call(owner, 'POST', `/api/templates/${created.id}/versions`, {}), 201);
    expect(Object.keys(auto).sort()).toEqual(VERSION_KEYS);
    expect(auto).toMatchObject({ name: 'Version 2', createdBy: owner.userId });
    expect(auto.createdAt).toMatch(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/);
    expect((await getTemplate(owner, created.id)).currentVersionId).toBe(auto.id);

    const named = await data(
      await call(owner, 'POST', '/api/templates/numbered/versions', { name: '  Before launch ' }),
      201,
    );
    expect(named.name).toBe('Before launch');
    // No body at all is the same as an empty one; numbering counts every version.
    const bodiless = await data(await call(owner, 'POST', `/api/templates/${created.id}/versions`), 201);
    expect(bodiless.name).toBe('Version 4');
    const template = await getTemplate(owner, 'numbered');
    expect(template.currentVersionId).toBe(bodiless.id);

    const listed = await versionsOf(owner, 'numbered');
    expect(listed.map((v: { name: string }) => v.name)).toEqual([
      'Version 4',
      'Before launch',
      'Version 2',
      'Version 1',
    ]);
    for (const version of listed) expect(Object.keys(version).sort()).toEqual(VERSION_KEYS);
    expect(listed[0]).toEqual(bodiless);

    for (const name of ['x'.repeat(101), '', '   ', 42]) {
      expectError(
        await call(owner, 'POST', `/api/templates/${created.id}/versions`, { name }),
        400,
        'VALIDATION_ERROR',
      );
    }
    const longest = await call(owner, 'POST', `/api/templates/${created.id}/versions`, {
      name: 'n'.repeat(100),
    });
    expect((await data(longest, 201)).name).toBe('n'.repeat(100));
    expect(await versionsOf(owner, created.id)).toHaveLength(5);
  });

  it('restores name, subject, design and PDF settings and records "Restored from …"', async () => {
    const created = await buildTemplate(ctx.app, owner, {
      name: 'Original name',
      subject: 'Hi {{ first_name }}',
      designJson: simpleDesign('First text for {{ first_name }}'),
      generatePdf: false,
      pdfFilename: 'first.pdf',
    });
    const original = await getTemplate(owner, created.id);
    const [version1] = await versionsOf(owner, created.id);

    const edit = await call(owner, 'PUT', `/api/templates/${created.id}`, {
      name: 'Edited name',
      subject: 'Changed {{ x }}',
      designJson: simpleDesign('Second text {{ y }}'),
      generatePdf: true,
      pdfFilename: 'second.pdf',
      description: 'not versioned',
    });
    expect(edit.statusCode, edit.body).toBe(200);
    const edited = await getTemplate(owner, created.id);
    expect(edited.variables).toEqual(['x', 'y']);
    expect(edited.compiledHtml).not.toBe(original.compiledHtml);

    const restored = await data(await restore(owner, created.id, version1.id));
    expect(Object.keys(restored).sort()).toEqual(Object.keys(original).sort());
    expect(restored).toMatchObject({
      id: created.id,
      name: 'Original name',
      subject: 'Hi {{ first_name }}',
      designJson: simpleDesign('First text for {{ first_name }}'),
      generatePdf: false,
      pdfFilename: 'first.pdf',
      variables: ['first_name'],
      compiledHtml: original.compiledHtml,
      description: 'not versioned',
    });
    expect(restored.currentVersionId).toMatch(/^ver_/);
    expect(restored.currentVersionId).not.toBe(version1.id);
    expect(await getTemplate(owner, created.id)).toEqual(restored);

    const listed = await versionsOf(owner, created.id);
    expect(listed.map((v: { id: string; name: string }) => [v.id, v.name])).toEqual([
      [restored.currentVersionId, 'Restored from Version 1'],
      [version1.id, 'Version 1'],
    ]);
    expect(listed[0].createdBy).toBe(owner.userId);

    // Restoring by slug works too, and restoring a "Restored from" version names it as such.
    const again = await data(await restore(owner, created.slug, restored.currentVersionId));
    expect((await versionsOf(owner, created.id))[0]).toMatchObject({
      id: again.currentVersionId,
      name: 'Restored from Restored from Version 1',
    });
  });

  it('answers 404 for an unknown version, a version of another template and an unknown template', async () => {
    const mine = await buildTemplate(ctx.app, owner, { name: 'Mine' });
    const other = await buildTemplate(ctx.app, owner, { name: 'Other' });
    const [otherVersion] = await versionsOf(owner, other.id);
    const stranger = await setupOwner(ctx.app);
    const foreign = await buildTemplate(ctx.app, stranger, { name: 'Foreign' });
    const [foreignVersion] = await versionsOf(stranger, foreign.id);

    for (const versionId of [UNKNOWN_VERSION, 'not-a-version', otherVersion.id, foreignVersion.id]) {
      expectError(await restore(owner, mine.id, versionId), 404, 'NOT_FOUND');
    }
    expectError(await restore(owner, 'no-such-template', otherVersion.id), 404, 'NOT_FOUND');
    for (const ref of [foreign.id, foreign.slug]) {
      expectError(await call(owner, 'GET', `/api/templates/${ref}/versions`), 404, 'NOT_FOUND');
      expectError(await call(owner, 'POST', `/api/templates/${ref}/versions`, {}), 404, 'NOT_FOUND');
      expectError(await restore(owner, ref, foreignVersion.id), 404, 'NOT_FOUND');
    }
    expect((await getTemplate(owner, mine.id)).name).toBe('Mine');
    expect(await versionsOf(stranger, foreign.id)).toHaveLength(1);
  });

  it('lets viewers list versions but only template editors create and restore them', async () => {
    const created = await buildTemplate(ctx.app, owner, { name: 'Role check' });
    const [version1] = await versionsOf(owner, created.id);
    const viewer = await addTeamMember(ctx.app, owner, 'viewer');
    const member = await addTeamMember(ctx.app, owner, 'member');

    expect(await versionsOf(viewer, created.id)).toHaveLength(1);
    expectError(await call(viewer, 'POST', `/api/templates/${created.id}/versions`, {}), 403, 'FORBIDDEN');
    expectError(await restore(viewer, created.id, version1.id), 403, 'FORBIDDEN');

    const byMember = await data(await call(member, 'POST', `/api/templates/${created.id}/versions`, {}), 201);
    expect(byMember.createdBy).toBe(member.userId);
    await data(await restore(member, created.id, version1.id));
    expectError(
      await ctx.app.inject({ method: 'GET', url: `/api/templates/${created.id}/versions` }),
      401,
      'UNAUTHORIZED',
    );
  });
});
