import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { createTestContext, type TestContext } from './helpers/app.ts';
import { sessionHeaders, setupOwner, type TeamOwner } from './helpers/auth.ts';
import { buildTemplate, fixtureNames, loadFixture, prependToFirstText } from './helpers/factories.ts';

type Method = 'GET' | 'POST' | 'PUT';

/** Issue #4 "Done means": every fixture round-trips through the template endpoints unchanged. */
describe('EmailBuilder fixtures round-trip', () => {
  let ctx: TestContext;
  let owner: TeamOwner;
  const call = async (method: Method, url: string, payload?: object, status = 200) => {
    const response = await ctx.app.inject({
      method,
      url,
      headers: sessionHeaders(ctx.app, owner),
      ...(payload ? { payload } : {}),
    });
    expect(response.statusCode, `${method} ${url}: ${response.body}`).toBe(status);
    return response.json().data;
  };
  const variables = { first_name: 'Ada' };

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

  it.each(fixtureNames())(
    '%s: create, preview, duplicate, version and restore keep the compiled HTML',
    async (fixture) => {
      const design = prependToFirstText(loadFixture(fixture), 'Dear {{ first_name }}, ');
      const created = await buildTemplate(ctx.app, owner, {
        name: `Round trip ${fixture}`,
        subject: `${fixture} for {{ first_name }}`,
        designJson: design,
      });
      const original = await call('GET', `/api/templates/${created.id}`);
      expect(original.designJson).toEqual(design);
      expect(original.variables).toEqual(['first_name']);
      const compiledHtml: string = original.compiledHtml;
      expect(compiledHtml).toContain('Dear {{ first_name }}, ');

      const preview = await call('POST', `/api/templates/${created.id}/preview`, { variables });
      expect(preview.subject).toBe(`${fixture} for Ada`);
      expect(preview.html).toContain('Dear Ada, ');
      expect(preview.missingVariables).toEqual([]);

      const copy = await call('POST', `/api/templates/${created.id}/duplicate`, undefined, 201);
      const copied = await call('GET', `/api/templates/${copy.id}`);
      expect(copied.compiledHtml).toBe(compiledHtml);
      expect(copied.designJson).toEqual(original.designJson);
      expect(await call('POST', `/api/templates/${copy.id}/preview`, { variables })).toEqual(preview);

      const checkpoint = await call(
        'POST',
        `/api/templates/${created.id}/versions`,
        { name: 'Checkpoint' },
        201,
      );
      const afterVersion = await call('GET', `/api/templates/${created.id}`);
      expect(afterVersion.compiledHtml).toBe(compiledHtml);
      expect(afterVersion.currentVersionId).toBe(checkpoint.id);

      await call('PUT', `/api/templates/${created.id}`, {
        name: 'Edited',
        designJson: prependToFirstText(design, 'Edited. '),
      });
      expect((await call('GET', `/api/templates/${created.id}`)).compiledHtml).not.toBe(compiledHtml);

      const restored = await call('PUT', `/api/templates/${created.id}/versions/${checkpoint.id}/restore`);
      expect(restored.compiledHtml).toBe(compiledHtml);
      expect(restored.designJson).toEqual(original.designJson);
      expect(restored.name).toBe(`Round trip ${fixture}`);
      expect(await call('POST', `/api/templates/${created.id}/preview`, { variables })).toEqual(preview);
    },
  );
});
