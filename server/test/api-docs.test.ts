import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestContext, type TestContext } from './helpers/app.ts';

/**
 * The API reference is loaded on the first /docs request (server/src/http/api-docs.ts): it must
 * answer what the Scalar plugin answers — redirect, document in both formats, UI and its script.
 */
describe('API reference under /docs, loaded on first use', () => {
  let ctx: TestContext;

  beforeAll(async () => {
    ctx = await createTestContext('postgres');
  });

  afterAll(() => ctx?.close());

  it('redirects /docs to /docs/ and serves the YAML document and the UI script with their types', async () => {
    const entry = await ctx.app.inject({ method: 'GET', url: '/docs' });
    expect(entry.statusCode).toBe(301);
    expect(entry.headers.location).toBe('/docs/');
    const yaml = await ctx.app.inject({ method: 'GET', url: '/docs/yaml' });
    expect(yaml.statusCode).toBe(200);
    expect(yaml.headers['content-type']).toContain('application/yaml');
    expect(yaml.body).toMatch(/^openapi: 3\./m);
    expect(yaml.body).toContain('/api/v1/send');
    const script = await ctx.app.inject({ method: 'GET', url: '/docs/js/scalar.js' });
    expect(script.statusCode).toBe(200);
    expect(script.headers['content-type']).toContain('application/javascript');
    expect(Number(script.headers['content-length'])).toBe(script.rawPayload.length);
    expect(script.rawPayload.length).toBeGreaterThan(1_000_000);
    // Same origin as the session cookie: never framed (review finding, session 14).
    const ui = await ctx.app.inject({ method: 'GET', url: '/docs/' });
    expect(ui.statusCode).toBe(200);
    expect(ui.headers['x-frame-options']).toBe('DENY');
    expect(ui.headers['content-security-policy']).toBe("frame-ancestors 'none'");
    expect(ui.headers['x-content-type-options']).toBe('nosniff');
  });

  it("documents each route's security and its permission and scope from its access rule", async () => {
    // Review finding, session 16: log reads listed session access only, though a logs:read key works.
    const document = (await ctx.app.inject({ method: 'GET', url: '/docs/json' })).json();
    const logs = document.paths['/api/logs'].get;
    expect(logs.security).toEqual([{ session: [] }, { apiKey: [] }]);
    expect(logs.description).toContain(
      'Access: a session whose role holds logs:view, or an API key with the scope logs:read.',
    );
    expect(document.paths['/api/v1/send'].post.security).toEqual([{ apiKey: [] }]);
    expect(document.paths['/api/suppressions'].get.security).toEqual([{ session: [] }, { apiKey: [] }]);
    expect(document.paths['/api/adapters'].post.security).toEqual([{ session: [] }]);
    expect(document.paths['/api/adapters'].post.description).toContain(
      'Access: a session whose role holds adapters:create.',
    );
    // Errors in the spec's envelope; bodies the route takes absent are not required.
    const errorAnswer = logs.responses['4XX'].content['application/json'].schema;
    expect(errorAnswer.required).toEqual(['success', 'error']);
    expect(logs.responses['5XX']).toBeDefined();
    expect(document.paths['/api/templates/{id}/versions'].post.requestBody.required).toBe(false);
    expect(document.paths['/api/v1/send'].post.requestBody.required).toBe(true);
    expect(JSON.stringify(document)).not.toContain('x-postwright-optional-body');
    // The auth library's endpoints the README's quick start uses are described too.
    expect(document.paths['/api/auth/sign-in/email'].post.requestBody.required).toBe(true);
    expect(document.paths['/api/auth/sign-out'].post).toBeDefined();
    expect(document.paths['/api/auth/get-session'].get).toBeDefined();
  });

  it('documents the optional X-Postwright-Team header on the session routes that check it', async () => {
    // Noticed in session 20: the dashboard's header (409 TEAM_SWITCHED) was in no document.
    const document = (await ctx.app.inject({ method: 'GET', url: '/docs/json' })).json();
    const shownTeam = (operation: { parameters?: { in: string; name: string; required?: boolean }[] }) =>
      operation.parameters?.find((p) => p.in === 'header' && p.name.toLowerCase() === 'x-postwright-team');
    const adapters = shownTeam(document.paths['/api/adapters'].post);
    expect(adapters?.required ?? false).toBe(false);
    expect(JSON.stringify(adapters)).toContain('TEAM_SWITCHED');
    expect(shownTeam(document.paths['/api/logs'].get)).toBeDefined();
    // Not on API-key routes, nor on the routes that tell or change a page's team.
    expect(shownTeam(document.paths['/api/v1/send'].post)).toBeUndefined();
    expect(shownTeam(document.paths['/api/teams'].get)).toBeUndefined();
    expect(shownTeam(document.paths['/api/auth/me'].get)).toBeUndefined();
    expect(shownTeam(document.paths['/api/auth/switch-team'].post)).toBeUndefined();
    // Every operation that lists it is one whose route checks it: a session route without teamFallback.
    const listing = Object.entries(document.paths as Record<string, Record<string, never>>).flatMap(
      ([path, operations]) =>
        Object.entries(operations)
          .filter(([, operation]) => shownTeam(operation))
          .map(([method]) => `${method.toUpperCase()} ${path}`),
    );
    expect(listing.length).toBeGreaterThan(20);
    const rules = new Map(ctx.app.ctx.routes.map((route) => [`${route.method} ${route.url}`, route.access]));
    for (const entry of listing) {
      const rule = rules.get(entry.replace(/\{(\w+)\}/g, ':$1'));
      expect(rule, entry).toMatchObject({ kind: 'session' });
      expect(rule && 'teamFallback' in rule ? rule.teamFallback : false, entry).toBe(false);
    }
  });

  it('answers an unknown path under /docs with the NOT_FOUND envelope', async () => {
    const missing = await ctx.app.inject({ method: 'GET', url: '/docs/nope' });
    expect(missing.statusCode).toBe(404);
    expect(missing.json()).toMatchObject({ success: false, error: { code: 'NOT_FOUND' } });
  });
});
