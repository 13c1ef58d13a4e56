import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { createTestContext, type TestContext } from './helpers/app.ts';
import { addTeamMember, sessionHeaders, setupOwner, type TeamOwner } from './helpers/auth.ts';
import { buildTemplate, expectError, simpleDesign } from './helpers/factories.ts';

type User = { cookie: string };

const GREETING = '{{ greeting | default: "Hello" }} {{ user.name }}, about you: {{ bio }}';

describe('template preview', () => {
  let ctx: TestContext;
  let owner: TeamOwner;
  let templateId: string;
  const preview = (user: User, ref: string, payload?: object) =>
    ctx.app.inject({
      method: 'POST',
      url: `/api/templates/${ref}/preview`,
      headers: sessionHeaders(ctx.app, user),
      ...(payload ? { payload } : {}),
    });
  const previewData = async (ref: string, variables: Record<string, unknown>, user: User = owner) => {
    const response = await preview(user, ref, { variables });
    expect(response.statusCode, response.body).toBe(200);
    expect(response.json().success).toBe(true);
    return response.json().data;
  };

  beforeAll(async () => {
    ctx = await createTestContext('postgres');
  });
  // Every case gets a team of its own (CONVENTIONS.md); the app and database are the file's.
  beforeEach(async () => {
    owner = await setupOwner(ctx.app);
    templateId = (
      await buildTemplate(ctx.app, owner, {
        name: 'Preview me',
        slug: 'preview-me',
        subject: 'Hi {{ first_name }} <{{ bio }}>',
        designJson: simpleDesign(GREETING),
      })
    ).id;
  });
  afterAll(async () => {
    await ctx?.close();
  });

  it('renders html, subject and text with the variables and lists none missing', async () => {
    const result = await previewData(templateId, {
      first_name: 'Ada',
      user: { name: 'Ada Lovelace' },
      bio: 'Analyst & poet',
      greeting: 'Welcome',
    });
    expect(Object.keys(result).sort()).toEqual(['html', 'missingVariables', 'subject', 'text']);
    expect(result.subject).toBe('Hi Ada <Analyst & poet>');
    expect(result.html).toMatch(/<html[\s>]/i);
    expect(result.html).toContain('Welcome Ada Lovelace, about you: Analyst &amp; poet');
    expect(result.html).not.toContain('{{');
    expect(result.text).toContain('Welcome Ada Lovelace, about you: Analyst & poet');
    expect(result.missingVariables).toEqual([]);
    expect(await previewData('preview-me', { first_name: 'Ada' })).toMatchObject({ subject: 'Hi Ada <>' });
  });

  it('lists the variables a caller left out, dotted paths by their full path', async () => {
    const all = ['bio', 'first_name', 'greeting', 'user.name'];
    expect((await previewData(templateId, {})).missingVariables).toEqual(all);
    expect((await previewData(templateId, { user: {} })).missingVariables).toEqual(all);
    expect((await previewData(templateId, { user: null, bio: '' })).missingVariables).toEqual([
      'first_name',
      'greeting',
      'user.name',
    ]);
    const filled = await previewData(templateId, {
      first_name: 'Bo',
      user: { name: 'Bo' },
      bio: null,
      greeting: 0,
    });
    expect(filled.missingVariables).toEqual([]);
    // A missing variable renders as nothing, and its default applies.
    expect((await previewData(templateId, {})).html).toContain('Hello , about you: ');
  });

  it('HTML-escapes <script> values in Text blocks; subject and text are not escaped', async () => {
    const attack = '<script>alert("x")</script>';
    const result = await previewData(templateId, { user: { name: attack }, bio: attack });
    expect(result.html).not.toContain('<script>');
    expect(result.html).toContain('&lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt;');
    expect(result.subject).toBe(`Hi  <${attack}>`);
    expect(result.text).toContain(attack);
  });

  it('previews the current content, unversioned edits included, without creating a version', async () => {
    const created = await buildTemplate(ctx.app, owner, { name: 'Draft', subject: 'Old {{ first_name }}' });
    const edit = await ctx.app.inject({
      method: 'PUT',
      url: `/api/templates/${created.id}`,
      headers: sessionHeaders(ctx.app, owner),
      payload: {
        subject: 'New {{ first_name }}',
        designJson: simpleDesign('Draft body for {{ first_name }}'),
      },
    });
    expect(edit.statusCode, edit.body).toBe(200);
    const result = await previewData(created.id, { first_name: 'Cy' });
    expect(result.subject).toBe('New Cy');
    expect(result.html).toContain('Draft body for Cy');
    const versions = await ctx.app.inject({
      method: 'GET',
      url: `/api/templates/${created.id}/versions`,
      headers: sessionHeaders(ctx.app, owner),
    });
    expect(versions.json().data.map((v: { name: string }) => v.name)).toEqual(['Version 1']);
  });

  it('validates the body: variables is a required object', async () => {
    for (const payload of [{}, { variables: [] }, { variables: 'x' }, { variables: null }]) {
      const error = expectError(await preview(owner, templateId, payload), 400, 'VALIDATION_ERROR');
      expect(error.details.issues[0].path).toMatch(/^body/);
    }
    expectError(await preview(owner, templateId), 400, 'VALIDATION_ERROR');
  });

  it('lets any member preview and hides other teams’ templates', async () => {
    const viewer = await addTeamMember(ctx.app, owner, 'viewer');
    expect((await previewData('preview-me', { first_name: 'Vi' }, viewer)).subject).toBe('Hi Vi <>');
    const stranger = await setupOwner(ctx.app);
    expectError(await preview(stranger, templateId, { variables: {} }), 404, 'NOT_FOUND');
    expectError(await preview(stranger, 'preview-me', { variables: {} }), 404, 'NOT_FOUND');
    expectError(await preview(owner, 'no-such-template', { variables: {} }), 404, 'NOT_FOUND');
    expectError(
      await ctx.app.inject({ method: 'POST', url: `/api/templates/${templateId}/preview`, payload: {} }),
      401,
      'UNAUTHORIZED',
    );
  });
});
