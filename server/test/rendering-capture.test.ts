import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { createTestContext, type TestContext } from './helpers/app.ts';
import { sessionHeaders, setupOwner, type TeamOwner } from './helpers/auth.ts';
import { buildTemplate, expectError, simpleDesign } from './helpers/factories.ts';

/** 15 characters doubled 25 times by `{% capture %}`: 503,316,480 characters if nothing stops it. */
const DOUBLING =
  '{% capture s %}xxxxxxxxxxxxxxx{% endcapture %}{% for i in (1..25) %}{% capture s %}{{ s }}{{ s }}{% endcapture %}{% endfor %}{{ s.size }}';
/** The same, with the seed and the number of doublings from the variables: harmless at save. */
const DOUBLING_BY_VARIABLES =
  '{% capture s %}{{ seed }}{% endcapture %}{% for i in (1..count) %}{% capture s %}{{ s }}{{ s }}{% endcapture %}{% endfor %}[{{ s.size }}]';

describe('{% capture %} through HTTP', () => {
  let ctx: TestContext;
  let owner: TeamOwner;
  const call = (method: 'POST' | 'PUT' | 'GET', url: string, payload?: object) =>
    ctx.app.inject({
      method,
      url,
      headers: sessionHeaders(ctx.app, owner),
      ...(payload ? { payload } : {}),
    });
  /** Asserts a 400 INVALID_TEMPLATE refused by the render's memory budget. */
  const expectMemoryLimit = (response: Parameters<typeof expectError>[0]) => {
    const error = expectError(response, 400, 'INVALID_TEMPLATE');
    expect(error.details.reason).toBe('LIMIT_EXCEEDED');
    expect(error.details.issues).toEqual([
      { path: 'b1.data.props.text', message: expect.stringMatching(/^memory alloc limit exceeded/) },
    ]);
  };

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

  it('refuses a template doubling a captured string at create and update, storing nothing', async () => {
    const hostile = { subject: 'Hi', designJson: simpleDesign(DOUBLING) };
    expectMemoryLimit(await call('POST', '/api/templates', { name: 'Capture bomb', ...hostile }));
    const template = await buildTemplate(ctx.app, owner, { name: 'Target' });
    const before = (await call('GET', `/api/templates/${template.id}`)).json().data;
    expectMemoryLimit(await call('PUT', `/api/templates/${template.id}`, hostile));
    expect((await call('GET', `/api/templates/${template.id}`)).json().data).toEqual(before);
    expect((await call('GET', '/api/templates?search=capture')).json().data.total).toBe(0);
  });

  it('refuses a preview whose variables make the captures grow past the budget', async () => {
    const template = await buildTemplate(ctx.app, owner, {
      name: 'Innocent captures',
      designJson: simpleDesign(DOUBLING_BY_VARIABLES),
    });
    const preview = (variables: Record<string, unknown>) =>
      call('POST', `/api/templates/${template.id}/preview`, { variables });
    expectMemoryLimit(await preview({ seed: 'xxxxxxxxxxxxxxx', count: 25 }));
    const ordinary = await preview({ seed: 'xxxxxxxxxxxxxxx', count: 3 });
    expect(ordinary.statusCode, ordinary.body).toBe(200);
    expect(ordinary.json().data.html).toContain('[120]');
  });

  it('renders ordinary captures as before', async () => {
    const template = await buildTemplate(ctx.app, owner, {
      name: 'Captures',
      subject: '{%- capture who -%} {{ first_name | capitalize }} {%- endcapture -%}Hi {{ who }}!',
      designJson: simpleDesign(
        '{% capture list %}{% for i in (1..3) %}{{ i }};{% endfor %}{% endcapture %}<{{ who }}|{{ list }}>',
      ),
    });
    const response = await call('POST', `/api/templates/${template.id}/preview`, {
      variables: { first_name: 'ada' },
    });
    expect(response.statusCode, response.body).toBe(200);
    expect(response.json().data.subject).toBe('Hi Ada!');
    // Each string has its own scope: the subject's capture is not seen by the Text block.
    expect(response.json().data.text).toContain('<|1;2;3;>');
  });
});
