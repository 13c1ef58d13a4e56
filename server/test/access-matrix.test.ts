import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { AccessRule, RouteAccess } from '../src/http/access.ts';
import { type Permission, ROLE_PERMISSIONS, TEAM_ROLES, type TeamRole } from '../src/http/permissions.ts';
import { API_KEY_SCOPES, type ApiKeyScope } from '../src/modules/api-keys/index.ts';
import { createTestContext, type TestContext } from './helpers/app.ts';
import { addTeamMember, ORIGIN_HEADERS, sessionHeaders, setupOwner, type TeamOwner } from './helpers/auth.ts';
import { buildApiKey, buildSmtpAdapter, buildTemplate, send } from './helpers/factories.ts';
import { closedPort } from './helpers/smtp-server.ts';
import { buildInvitation } from './helpers/teams.ts';
import { PNG_1X1, pathOf, uploadImage } from './helpers/uploads.ts';

/**
 * The isolation and permission matrix of issue #3, built from the app's route table: every route
 * must declare an access rule; every non-public route is called without credentials (401), with a
 * session of each role (403 exactly where the role matrix says), with API keys of each scope, and by
 * another team on this team's resource ids (404, never the resource).
 *
 * The calls run in phases so that no call can hide another's effect: first every route is called
 * anonymously and by the other team (before any role of this team touches a resource), then the
 * sample resources must be intact; then the roles and API-key scopes, with the DELETE routes last
 * (the resources must still exist when that phase starts) and, on each route, the callers expected
 * to be refused before those expected to get through.
 */

type Caller = { cookie?: string; apiKey?: string };
type Check = { route: string; caller: string; status: number };
type Expected = number | 'allowed';
type GuardedRoute = RouteAccess & { access: Exclude<AccessRule, { kind: 'public' }> };

/** Routes served by plugins we do not own (OpenAPI UI and document): public by nature. */
const PLUGIN_ROUTES = /^\/docs(\/|$)/;

/**
 * Permissions the role expectations use instead of the route's declared one, for routes whose
 * service adds a rule. `DELETE /api/team/members/:userId` lets any member through the route because
 * a member may remove themself (so EXPECTED keeps 'member'); the matrix's sample target is another
 * member, which the service only lets team:manage remove (checked before the member is looked up).
 */
const EFFECTIVE_PERMISSION: Record<string, Permission> = {
  'DELETE /api/team/members/:userId': 'team:manage',
};

/**
 * What the spec's endpoint tables and issues #2-#4 say each route needs: a permission (session),
 * 'member' (membership only), the public API's scopes, or 'public'; plus the API-key scopes a
 * dashboard route accepts (issue #3). Declared rules must equal this.
 */
const EXPECTED: Record<string, string> = {
  'POST /api/v1/send': 'key:send',
  'POST /api/v1/send/batch': 'key:send',
  'POST /api/v1/:id/cancel': 'key:send',
  'GET /api/v1/:id/status': 'key:send|logs:read',
  'GET /api/api-keys': 'api-keys:view',
  'GET /api/api-keys/:id': 'api-keys:view',
  'POST /api/api-keys': 'api-keys:create',
  'PUT /api/api-keys/:id': 'api-keys:create',
  'DELETE /api/api-keys/:id': 'api-keys:delete',
  'POST /api/api-keys/:id/regenerate': 'api-keys:create',
  'GET /api/adapters/types': 'member',
  'GET /api/adapters': 'member',
  'GET /api/adapters/:id': 'adapters:view-config',
  'POST /api/adapters': 'adapters:create',
  'PUT /api/adapters/:id': 'adapters:update',
  'DELETE /api/adapters/:id': 'adapters:delete',
  'POST /api/adapters/:id/test': 'adapters:update',
  'GET /api/templates': 'member +templates:read',
  'GET /api/templates/:id': 'member +templates:read',
  'POST /api/templates': 'templates:create +templates:write',
  'PUT /api/templates/:id': 'templates:update +templates:write',
  'DELETE /api/templates/:id': 'templates:delete +templates:delete',
  'POST /api/templates/:id/duplicate': 'templates:create +templates:write',
  'GET /api/templates/:id/versions': 'member +templates:read',
  'POST /api/templates/:id/versions': 'templates:update +templates:write',
  'PUT /api/templates/:id/versions/:versionId/restore': 'templates:update +templates:write',
  'POST /api/templates/:id/preview': 'member +templates:read',
  'POST /api/templates/:id/send-test': 'logs:resend',
  'GET /api/logs': 'logs:view +logs:read',
  'GET /api/logs/:id': 'logs:view +logs:read',
  'GET /api/logs/:id/events': 'logs:view +logs:read',
  'GET /api/logs/:id/recipients': 'logs:view +logs:read',
  'GET /api/logs/:id/rendered': 'logs:view +logs:read',
  'GET /api/logs/stats': 'logs:view +logs:read',
  'POST /api/logs/:id/resend': 'logs:resend',
  'GET /api/suppressions': 'logs:view +logs:read',
  'POST /api/suppressions': 'logs:resend',
  'DELETE /api/suppressions/:id': 'logs:resend',
  'POST /api/uploads/images': 'templates:update',
  'DELETE /api/uploads/images/:key': 'templates:update',
  'GET /api/uploads/images': 'member',
  'GET /api/uploads/usage': 'member',
  'GET /api/teams': 'member',
  'POST /api/teams': 'member',
  'POST /api/auth/switch-team': 'member',
  'GET /api/auth/me': 'member',
  'GET /api/team/members': 'member',
  'PUT /api/team/members/:userId': 'team:manage',
  'DELETE /api/team/members/:userId': 'member',
  'POST /api/team/invitations': 'team:manage',
  'GET /api/team/invitations': 'team:manage',
  'DELETE /api/team/invitations/:id': 'team:manage',
  'GET /api/webhooks': 'webhooks:create',
  'GET /api/webhooks/:id': 'webhooks:create',
  'POST /api/webhooks': 'webhooks:create',
  'PUT /api/webhooks/:id': 'webhooks:update',
  'DELETE /api/webhooks/:id': 'webhooks:delete',
  'POST /api/webhooks/:id/rotate-secret': 'webhooks:update',
  'POST /api/webhooks/:id/test': 'webhooks:update',
  'GET /api/webhooks/:id/deliveries': 'webhooks:create',
  'POST /api/webhooks/:id/deliveries/:deliveryId/redeliver': 'webhooks:update',
};

function describeRule(rule: AccessRule): string {
  if (rule.kind === 'public') return 'public';
  if (rule.kind === 'apiKey') return `key:${rule.scopes.join('|')}`;
  const scopes = rule.apiKeyScopes?.length ? ` +${rule.apiKeyScopes.join('|')}` : '';
  return `${rule.permission ?? 'member'}${scopes}`;
}

/** Valid bodies, so a cross-team call reaches the handler (and its 404) instead of failing validation. */
function bodyFor(method: string, url: string, ids: Record<string, string>): unknown {
  const bodies: Record<string, unknown> = {
    'PUT /api/api-keys/:id': { name: 'renamed' },
    'PUT /api/adapters/:id': { name: 'renamed' },
    'PUT /api/templates/:id': { name: 'renamed' },
    'PUT /api/webhooks/:id': { name: 'renamed' },
    'POST /api/templates/:id/versions': { name: 'v' },
    'POST /api/templates/:id/preview': { variables: {} },
    // A real change (the sample member is a 'member'), so a cross-team update that worked shows.
    'PUT /api/team/members/:userId': { role: 'viewer' },
    'POST /api/auth/switch-team': { teamId: ids.teamId },
    'POST /api/suppressions': { address: 'matrix-added@example.test' },
  };
  const key = `${method} ${url}`;
  if (key in bodies) return bodies[key];
  return method === 'POST' || method === 'PUT' ? {} : undefined;
}

describe('access matrix over every route', () => {
  let ctx: TestContext;
  let owner: TeamOwner;
  let stranger: TeamOwner;
  const roles = {} as Record<TeamRole, { cookie: string }>;
  const scopedKeys = {} as Record<ApiKeyScope, string>;
  let strangerKey: string;
  const ids: Record<string, string> = {};
  let imageUrl: string;
  let baseline: Samples;

  beforeAll(async () => {
    ctx = await createTestContext('postgres');
    owner = await setupOwner(ctx.app);
    stranger = await setupOwner(ctx.app);
    roles.owner = owner;
    for (const role of ['admin', 'member', 'viewer'] as const)
      roles[role] = await addTeamMember(ctx.app, owner, role);
    for (const scope of API_KEY_SCOPES) {
      scopedKeys[scope] = (await buildApiKey(ctx.app, owner, { scopes: [scope], rateLimit: 10_000 })).key;
    }
    strangerKey = (await buildApiKey(ctx.app, stranger, { scopes: [...API_KEY_SCOPES], rateLimit: 10_000 }))
      .key;

    // This team's resources, addressed by the route parameters below.
    const adapter = await buildSmtpAdapter(ctx.app, owner, await closedPort());
    const template = await buildTemplate(ctx.app, owner, { name: 'Matrix' });
    const sendKey = (await buildApiKey(ctx.app, owner, { scopes: ['send'] })).key;
    const sent = await send(ctx.app, sendKey, { templateId: template.id, to: 'matrix@example.test' });
    expect(sent.statusCode, sent.body).toBe(202);
    const sampleKey = await buildApiKey(ctx.app, owner, { name: 'sample' });
    const throwaway = await addTeamMember(ctx.app, owner, 'member');
    const invitation = await buildInvitation(ctx.app, owner);
    const suppression = await ctx.app.inject({
      method: 'POST',
      url: '/api/suppressions',
      headers: sessionHeaders(ctx.app, owner),
      payload: { address: 'matrix-suppressed@example.test', reason: 'sample' },
    });
    expect(suppression.statusCode, suppression.body).toBe(201);
    const upload = await uploadImage(ctx.app, owner, { filename: 'a.png', bytes: PNG_1X1 });
    expect(upload.statusCode, upload.body).toBe(201);
    // A webhook whose receiver is refused at once (loopback, WEBHOOKS_ALLOW_PRIVATE unset): its test
    // and redeliver calls record a failed attempt without waiting for anything.
    const webhook = await ctx.app.inject({
      method: 'POST',
      url: '/api/webhooks',
      headers: sessionHeaders(ctx.app, owner),
      payload: { name: 'sample', url: `http://localhost:${await closedPort()}/hook`, events: ['email.sent'] },
    });
    expect(webhook.statusCode, webhook.body).toBe(201);
    const webhookTest = await ctx.app.inject({
      method: 'POST',
      url: `/api/webhooks/${webhook.json().data.id}/test`,
      headers: sessionHeaders(ctx.app, owner),
    });
    expect(webhookTest.statusCode, webhookTest.body).toBe(200);
    const templateFull = await ctx.app.inject({
      method: 'GET',
      url: `/api/templates/${template.id}`,
      headers: { cookie: owner.cookie },
    });
    Object.assign(ids, {
      teamId: owner.teamId,
      'api-keys': sampleKey.id,
      adapters: adapter.id,
      templates: template.id,
      versionId: templateFull.json().data.currentVersionId,
      logs: sent.json().data.id,
      v1: sent.json().data.id,
      members: throwaway.userId,
      invitations: invitation.id,
      images: upload.json().data.key,
      suppressions: suppression.json().data.id,
      webhooks: webhook.json().data.id,
      deliveryId: webhookTest.json().data.id,
    });
    imageUrl = upload.json().data.url;
    baseline = await readSamples();
    expect(baseline.apiKey.name).toBe('sample');
    expect(baseline.template.name).toBe('Matrix');
  });
  afterAll(() => ctx?.close());

  /** The URL with each `:param` replaced by this team's sample id; throws for an unknown one. */
  function concreteUrl(url: string): string {
    const segments = url.split('/');
    return segments
      .map((segment, index) => {
        if (!segment.startsWith(':')) return segment;
        const name = segment.slice(1);
        const sample =
          name === 'id' || name === 'userId' || name === 'key' ? ids[segments[index - 1]!] : ids[name];
        if (!sample) throw new Error(`no sample id for ${segment} in ${url}: add one to the access matrix`);
        return encodeURIComponent(sample);
      })
      .join('/');
  }

  type Samples = Awaited<ReturnType<typeof readSamples>>;

  /**
   * Reads every sample resource as the owner, failing when one is gone: the API key, adapter and
   * template (with its versions), the member and invitation in their lists, the uploaded image at
   * its public URL, the sample webhook's delivery records (a test or redeliver adds one), and how
   * many templates and logs the team and the other team have (a duplicate or resend adds one, in
   * the team of the caller it was made for). The counts are the lists' `total`: the lists are
   * paginated objects, whose `.length` was undefined, so a duplicate or resend made by a refused
   * call went unseen (review finding, session 22).
   */
  async function readSamples() {
    const getAs = async (user: { cookie: string }, url: string) => {
      const response = await ctx.app.inject({ method: 'GET', url, headers: sessionHeaders(ctx.app, user) });
      expect(response.statusCode, `GET ${url}: ${response.body}`).toBe(200);
      return response.json().data;
    };
    const get = (url: string) => getAs(owner, url);
    const totalOf = async (user: { cookie: string }, url: string): Promise<number> => {
      const { total } = (await getAs(user, url)) as { total: unknown };
      expect(typeof total, `GET ${url} answers a page with a total`).toBe('number');
      return total as number;
    };
    const members: Array<{ userId: string; role: string }> = await get('/api/team/members');
    const invitations: Array<{ id: string }> = await get('/api/team/invitations');
    const member = members.find((m) => m.userId === ids.members);
    expect(member, 'the sample member is still in the team').toBeDefined();
    expect(
      invitations.map((i) => i.id),
      'the sample invitation is still pending',
    ).toContain(ids.invitations);
    const image = await ctx.app.inject({ method: 'GET', url: pathOf(imageUrl) });
    expect(image.statusCode, `GET ${imageUrl}: ${image.body}`).toBe(200);
    return {
      apiKey: await get(`/api/api-keys/${ids['api-keys']}`),
      adapter: await get(`/api/adapters/${ids.adapters}`),
      template: await get(`/api/templates/${ids.templates}`),
      webhook: await get(`/api/webhooks/${ids.webhooks}`),
      versions: await get(`/api/templates/${ids.templates}/versions`),
      deliveryCount: ((await get(`/api/webhooks/${ids.webhooks}/deliveries`)) as unknown[]).length,
      templateCount: await totalOf(owner, '/api/templates'),
      logCount: await totalOf(owner, '/api/logs'),
      otherTeamTemplateCount: await totalOf(stranger, '/api/templates'),
      otherTeamLogCount: await totalOf(stranger, '/api/logs'),
      suppressions: await get('/api/suppressions'),
      member,
      invitations,
      image: image.rawPayload.toString('base64'),
    };
  }

  async function call(route: RouteAccess, caller: Caller): Promise<number> {
    const body = bodyFor(route.method, route.url, ids);
    const response = await ctx.app.inject({
      method: route.method as 'GET',
      url: concreteUrl(route.url),
      headers: {
        ...ORIGIN_HEADERS(ctx.app),
        ...(caller.cookie ? { cookie: caller.cookie } : {}),
        ...(caller.apiKey ? { 'x-api-key': caller.apiKey } : {}),
      },
      ...(body === undefined ? {} : { payload: body as object }),
    });
    expect(response.statusCode, `${route.method} ${route.url}: ${response.body}`).toBeLessThan(500);
    return response.statusCode;
  }

  it('every route declares an access rule', () => {
    const undeclared = ctx.app.ctx.routes
      .filter((r) => !r.access && !PLUGIN_ROUTES.test(r.url))
      .map((r) => `${r.method} ${r.url}`);
    expect(undeclared).toEqual([]);
  });

  it('declares exactly the access the spec and the issues give each guarded route', () => {
    const declared = Object.fromEntries(
      ctx.app.ctx.routes
        .filter((r) => r.access && r.access.kind !== 'public' && r.method !== 'HEAD')
        .map((r) => [`${r.method} ${r.url}`, describeRule(r.access!)]),
    );
    expect(declared).toEqual(EXPECTED);
  });

  it('enforces authentication, roles, API-key scopes and team isolation on every route', async () => {
    const checks: Check[] = [];
    const expectStatus = (route: RouteAccess, caller: string, status: number, expected: Expected) => {
      const label = `${route.method} ${route.url} as ${caller}`;
      if (expected === 'allowed') expect([401, 403], `${label} → ${status}`).not.toContain(status);
      else expect(status, label).toBe(expected);
      checks.push({ route: `${route.method} ${route.url}`, caller, status });
    };
    /** Calls `route` as each caller, those expected to be refused first, and checks each status. */
    const run = async (route: RouteAccess, callers: Array<[string, Caller, Expected]>) => {
      const refusedFirst = [
        ...callers.filter(([, , expected]) => expected !== 'allowed'),
        ...callers.filter(([, , expected]) => expected === 'allowed'),
      ];
      for (const [label, caller, expected] of refusedFirst)
        expectStatus(route, label, await call(route, caller), expected);
    };
    const guarded = ctx.app.ctx.routes.filter(
      (r): r is GuardedRoute => r.access !== undefined && r.access.kind !== 'public' && r.method !== 'HEAD',
    );
    expect(guarded.length).toBeGreaterThan(30);

    // Phase 1, before any role of this team calls anything: no credentials, and the other team.
    for (const route of guarded) {
      const rule = route.access;
      const key = `${route.method} ${route.url}`;
      const callers: Array<[string, Caller, Expected]> = [['anonymous', {}, 401]];
      if (rule.kind === 'apiKey') {
        if (route.url.includes(':')) callers.push(['other team key', { apiKey: strangerKey }, 404]);
      } else if (route.url.includes(':') || key === 'POST /api/auth/switch-team') {
        callers.push(['other team owner', { cookie: stranger.cookie }, 404]);
        if (rule.apiKeyScopes?.length) callers.push(['other team key', { apiKey: strangerKey }, 404]);
      }
      await run(route, callers);
    }
    // A cross-team update or delete that answered 404 but did its work anyway fails here.
    const afterIsolation = await readSamples();
    expect(afterIsolation).toEqual(baseline);
    expect(afterIsolation.apiKey.name).toBe('sample');
    expect(afterIsolation.template.name).toBe('Matrix');
    expect(afterIsolation.member?.role).toBe('member');

    // Phase 2: this team's roles and API-key scopes, every DELETE route after all the others.
    const ordered = [
      ...guarded.filter((r) => r.method !== 'DELETE'),
      ...guarded.filter((r) => r.method === 'DELETE'),
    ];
    let deletesStarted = false;
    for (const route of ordered) {
      const rule = route.access;
      const key = `${route.method} ${route.url}`;
      if (route.method === 'DELETE' && !deletesStarted) {
        deletesStarted = true;
        await readSamples(); // every sample resource is still there for the DELETE routes
      }
      const callers: Array<[string, Caller, Expected]> = [];
      if (rule.kind === 'apiKey') {
        for (const scope of API_KEY_SCOPES) {
          const expected = rule.scopes.includes(scope) ? 'allowed' : 403;
          callers.push([`key[${scope}]`, { apiKey: scopedKeys[scope] }, expected]);
        }
        callers.push(['owner session', { cookie: owner.cookie }, 401]);
        await run(route, callers);
        continue;
      }
      const permission = EFFECTIVE_PERMISSION[key] ?? rule.permission;
      for (const role of TEAM_ROLES) {
        const granted = !permission || ROLE_PERMISSIONS[role].includes(permission);
        callers.push([role, { cookie: roles[role].cookie }, granted ? 'allowed' : 403]);
      }
      const accepted = rule.apiKeyScopes ?? [];
      for (const scope of API_KEY_SCOPES) {
        const expected = accepted.length === 0 ? 401 : accepted.includes(scope) ? 'allowed' : 403;
        callers.push([`key[${scope}]`, { apiKey: scopedKeys[scope] }, expected]);
      }
      await run(route, callers);
    }
    expect(deletesStarted).toBe(true);

    const routes = new Set(checks.map((c) => c.route)).size;
    console.log(`access matrix: ${checks.length} (endpoint, caller) pairs checked over ${routes} endpoints`);
    expect(checks.length).toBeGreaterThan(routes * 5);
  });
});
