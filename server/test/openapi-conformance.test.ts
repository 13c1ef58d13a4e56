/**
 * The OpenAPI document (`/docs/json`, what the dashboard's types and `/docs` are made from) against
 * the app itself (OpenAPI review):
 * - every real answer, success and error, of every documented operation matches what the document
 *   declares for its status (the exact code, else `4XX`/`5XX`): status, media type, body (ajv with
 *   OpenAPI 3.0's `nullable`), and the `Location` of a declared redirect; and every JSON body the
 *   server accepted (2xx) fits the operation's documented request body;
 * - every route the app answers is documented (the auth library's open endpoints and the health
 *   probes included), under a valid path template, with a success answer and the error envelope;
 * - the batch item is the send body, each adapter type's config is listed, the API key defaults
 *   are given;
 * - on an https BASE_URL the documented session cookie is the one the server sets and reads.
 */
import { Ajv, type ValidateFunction } from 'ajv';
import addFormats from 'ajv-formats';
import type { LightMyRequestResponse } from 'fastify';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { OPEN_AUTH_PATHS } from '../src/modules/auth/auth.mount.ts';
import { signTrackingToken, trackingKey } from '../src/tracking/tokens.ts';
import { createTestContext, type TestContext, waitFor } from './helpers/app.ts';
import { addTeamMember, ORIGIN_HEADERS, randomClientIp, sessionHeaders, setupOwner } from './helpers/auth.ts';
import { simpleDesign } from './helpers/factories.ts';
import { createTeamWithKey, type SendingTeam } from './helpers/sending-team.ts';
import { startTestSmtpServer, type TestSmtpServer } from './helpers/smtp-server.ts';
import { buildInvitation, tokenOf } from './helpers/teams.ts';
import { multipartBody, PNG_1X1, pathOf } from './helpers/uploads.ts';
import { startWebhookReceiver, type WebhookReceiver } from './helpers/webhook-receiver.ts';

type Method = 'GET' | 'POST' | 'PUT' | 'DELETE';
type Schema = Record<string, unknown>;
interface Operation {
  parameters?: { name: string; in: string }[];
  requestBody?: { content?: Record<string, { schema?: Schema }> };
  responses?: Record<
    string,
    { content?: Record<string, { schema?: Schema }>; headers?: Record<string, unknown> } | undefined
  >;
}
interface Doc {
  paths: Record<string, Record<string, Operation>>;
  components: { securitySchemes: Record<string, { name: string }> };
}

/** An ajv for OpenAPI 3.0 schemas (`nullable`, formats; binary bodies are not parsed). */
function openApiValidator(): Ajv {
  const ajv = new Ajv({ strict: false, allErrors: true });
  addFormats.default(ajv);
  ajv.addFormat('binary', true);
  ajv.addFormat('base64', /^[A-Za-z0-9+/]*={0,2}$/);
  return ajv;
}

/** ajv's errors as one line each (`/path message (extra property)`). */
function errorsOf(validate: ValidateFunction): string {
  return (validate.errors ?? [])
    .slice(0, 8)
    .map((e) => {
      const extra = 'additionalProperty' in e.params ? ` (${String(e.params.additionalProperty)})` : '';
      return `${e.instancePath || '/'} ${e.message}${extra}`;
    })
    .join('; ');
}

/** The shape of a path with every parameter (`{id}`, `:id`, a `*` wildcard) written `{}`. */
function shapeOf(path: string): string {
  return path.replace(/\{[^}]*\}|:[A-Za-z0-9_]+|\*$/g, '{}');
}

async function documentOf(ctx: TestContext): Promise<Doc> {
  const response = await ctx.app.inject({ method: 'GET', url: '/docs/json' });
  expect(response.statusCode).toBe(200);
  return response.json();
}

describe('the OpenAPI document against the real answers', () => {
  let ctx: TestContext;
  let doc: Doc;
  let smtp: TestSmtpServer;
  let receiver: WebhookReceiver;
  let team: SendingTeam;
  const ajv = openApiValidator();

  beforeAll(async () => {
    ctx = await createTestContext('postgres', {
      WEBHOOKS_ALLOW_PRIVATE: 'true',
      WEBHOOK_RETRY_SCHEDULE: '1',
      GITHUB_CLIENT_ID: 'conformance-client',
      GITHUB_CLIENT_SECRET: 'conformance-secret',
    });
    smtp = await startTestSmtpServer();
    receiver = await startWebhookReceiver();
    await ctx.startWorkers();
    doc = await documentOf(ctx);
    team = await createTeamWithKey(ctx.app, {
      smtpPort: smtp.port,
      key: { scopes: ['send', 'templates:read', 'templates:write', 'templates:delete', 'logs:read'] },
      template: { trackOpens: true, trackClicks: true },
    });
  });
  afterAll(async () => {
    await receiver?.close();
    await smtp?.close();
    await ctx?.close();
  });

  /** Operations called (`GET /api/logs/{id}`) and every mismatch found, with its call. */
  const seen = new Set<string>();
  const problems: string[] = [];

  /** Checks `res` (and the body it accepted) against the document's `method docPath`. */
  function check(
    label: string,
    method: Method,
    docPath: string,
    payload: unknown,
    res: LightMyRequestResponse,
  ) {
    seen.add(`${method} ${docPath}`);
    const where = `${label} [${method} ${docPath} -> ${res.statusCode}]`;
    const op = doc.paths[docPath]?.[method.toLowerCase()];
    if (!op) {
      problems.push(`${where}: operation not in the document`);
      return;
    }
    const requestSchema = op.requestBody?.content?.['application/json']?.schema;
    const jsonPayload = payload !== null && typeof payload === 'object' && !Buffer.isBuffer(payload);
    if (res.statusCode < 300 && requestSchema && jsonPayload) {
      const validate = ajv.compile(requestSchema);
      if (!validate(payload))
        problems.push(`${where}: accepted body not allowed by the document: ${errorsOf(validate)}`);
    }
    const code = String(res.statusCode);
    const declared = op.responses?.[code] ?? op.responses?.[`${code[0]}XX`];
    if (!declared) {
      const codes = Object.keys(op.responses ?? {}).join(', ');
      problems.push(`${where}: status not declared (declared: ${codes}) body=${res.body.slice(0, 200)}`);
      return;
    }
    if (declared.headers?.Location && !res.headers.location) problems.push(`${where}: no Location header`);
    const type = String(res.headers['content-type'] ?? '')
      .split(';')[0]!
      .trim();
    if (!declared.content) {
      if (res.body.length > 0) problems.push(`${where}: a body, none declared: ${res.body.slice(0, 200)}`);
      return;
    }
    const media = declared.content[type];
    if (!media?.schema) {
      problems.push(
        `${where}: content-type ${type} not declared (declared: ${Object.keys(declared.content)})`,
      );
      return;
    }
    if (type !== 'application/json') return;
    const validate = ajv.compile(media.schema);
    if (!validate(res.body === '' ? undefined : JSON.parse(res.body))) {
      problems.push(`${where}: body does not match: ${errorsOf(validate)} | body=${res.body.slice(0, 300)}`);
    }
  }

  /** Calls `url` as `as` (default: the team's owner; 'key': its API key; a string: that key) and checks the answer. */
  async function call(
    label: string,
    method: Method,
    docPath: string,
    url: string,
    options: {
      as?: { cookie: string } | 'key' | string | null;
      payload?: unknown;
      headers?: Record<string, string>;
    } = {},
  ) {
    const as = options.as === undefined ? team.owner : options.as;
    const headers: Record<string, string> = { ...options.headers };
    if (as === 'key') headers['x-api-key'] = team.key;
    else if (typeof as === 'string') headers['x-api-key'] = as;
    else if (as) Object.assign(headers, sessionHeaders(ctx.app, as));
    const res = await ctx.app.inject({
      method,
      url,
      headers,
      remoteAddress: randomClientIp(),
      ...(options.payload === undefined ? {} : { payload: options.payload as string }),
    });
    check(label, method, docPath, options.payload, res);
    return res;
  }

  it('declares every status and body the routes really answer, and takes the bodies they accept', async () => {
    const owner = team.owner;
    const app = ctx.app;
    // ---------------- auth
    await call('setup status', 'GET', '/api/auth/setup', '/api/auth/setup', { as: null });
    await call('setup again', 'POST', '/api/auth/setup', '/api/auth/setup', {
      as: null,
      headers: ORIGIN_HEADERS(app),
      payload: { token: 'x', name: 'a', email: 'a@example.test', password: 'password123', teamName: 't' },
    });
    await call('setup bad body', 'POST', '/api/auth/setup', '/api/auth/setup', {
      as: null,
      headers: ORIGIN_HEADERS(app),
      payload: { token: 'x' },
    });
    await call('providers', 'GET', '/api/auth/providers', '/api/auth/providers', { as: null });
    await call('sign-in provider unknown', 'GET', '/api/auth/sign-in/{provider}', '/api/auth/sign-in/nope', {
      as: null,
    });
    await call(
      'sign-in provider password',
      'GET',
      '/api/auth/sign-in/{provider}',
      '/api/auth/sign-in/github',
      { as: null },
    );
    await call('me', 'GET', '/api/auth/me', '/api/auth/me');
    await call('me anon', 'GET', '/api/auth/me', '/api/auth/me', { as: null });
    await call('me with key', 'GET', '/api/auth/me', '/api/auth/me', { as: 'key' });
    await call('sign-in email', 'POST', '/api/auth/sign-in/email', '/api/auth/sign-in/email', {
      as: null,
      headers: ORIGIN_HEADERS(app),
      payload: { email: owner.email, password: owner.password },
    });
    await call('sign-in email wrong', 'POST', '/api/auth/sign-in/email', '/api/auth/sign-in/email', {
      as: null,
      headers: ORIGIN_HEADERS(app),
      payload: { email: owner.email, password: 'wrong-password' },
    });
    await call('sign-in email bad body', 'POST', '/api/auth/sign-in/email', '/api/auth/sign-in/email', {
      as: null,
      headers: ORIGIN_HEADERS(app),
      payload: { email: 'x' },
    });
    await call('get-session', 'GET', '/api/auth/get-session', '/api/auth/get-session');
    await call('list-sessions', 'GET', '/api/auth/list-sessions', '/api/auth/list-sessions');
    await call('list-sessions anon', 'GET', '/api/auth/list-sessions', '/api/auth/list-sessions', {
      as: null,
    });
    await call('update-user', 'POST', '/api/auth/update-user', '/api/auth/update-user', {
      payload: { name: 'Test Owner' },
    });
    await call('update-user email', 'POST', '/api/auth/update-user', '/api/auth/update-user', {
      payload: { email: 'other@example.test' },
    });
    await call('change-password wrong', 'POST', '/api/auth/change-password', '/api/auth/change-password', {
      payload: { currentPassword: 'x-wrong-pw', newPassword: 'whatever-123456' },
    });
    // Members of their own, since these end sessions.
    const changer = await addTeamMember(app, owner, 'viewer');
    await call('change-password', 'POST', '/api/auth/change-password', '/api/auth/change-password', {
      as: changer,
      payload: { currentPassword: changer.password, newPassword: 'whatever-123456' },
    });
    const leaver = await addTeamMember(app, owner, 'viewer');
    await call(
      'revoke-other-sessions',
      'POST',
      '/api/auth/revoke-other-sessions',
      '/api/auth/revoke-other-sessions',
      { as: leaver, payload: {} },
    );
    await call('revoke-sessions', 'POST', '/api/auth/revoke-sessions', '/api/auth/revoke-sessions', {
      as: leaver,
      payload: {},
    });
    await call('revoke-sessions again', 'POST', '/api/auth/revoke-sessions', '/api/auth/revoke-sessions', {
      as: leaver,
      payload: {},
    });
    await call('sign-up', 'POST', '/api/auth/sign-up/email', '/api/auth/sign-up/email', {
      as: null,
      headers: ORIGIN_HEADERS(app),
      payload: { name: 'N', email: 'n@example.test', password: 'password-123456' },
    });
    await call('auth ok', 'GET', '/api/auth/ok', '/api/auth/ok', { as: null });
    await call('auth error', 'GET', '/api/auth/error', '/api/auth/error?error=state_mismatch', { as: null });
    await call('callback', 'GET', '/api/auth/callback/{provider}', '/api/auth/callback/github', { as: null });
    await call('callback post', 'POST', '/api/auth/callback/{provider}', '/api/auth/callback/github', {
      as: null,
      payload: {},
    });
    await call('healthz', 'GET', '/healthz', '/healthz', { as: null });
    await call('readyz', 'GET', '/readyz', '/readyz', { as: null });
    await call('get-session anon', 'GET', '/api/auth/get-session', '/api/auth/get-session', { as: null });

    // ---------------- api keys
    const keyList = await call('keys list', 'GET', '/api/api-keys', '/api/api-keys');
    const keyCreated = await call('key create', 'POST', '/api/api-keys', '/api/api-keys', {
      payload: {
        name: 'k2',
        scopes: ['logs:read'],
        expiresAt: new Date(Date.now() + 86_400_000).toISOString(),
      },
    });
    const k2 = keyCreated.json().data;
    await call('key create bad', 'POST', '/api/api-keys', '/api/api-keys', { payload: { name: '' } });
    await call('key create 10001', 'POST', '/api/api-keys', '/api/api-keys', {
      payload: { name: 'big', rateLimit: 10_001 },
    });
    await call('key get', 'GET', '/api/api-keys/{id}', `/api/api-keys/${k2.id}`);
    await call('key get 404', 'GET', '/api/api-keys/{id}', '/api/api-keys/key_nope');
    await call('key put', 'PUT', '/api/api-keys/{id}', `/api/api-keys/${k2.id}`, {
      payload: { name: 'k2b', isActive: true },
    });
    await call('key regen', 'POST', '/api/api-keys/{id}/regenerate', `/api/api-keys/${k2.id}/regenerate`);
    await call('keys anon', 'GET', '/api/api-keys', '/api/api-keys', { as: null });
    await call('keys w/ key', 'GET', '/api/api-keys', '/api/api-keys', { as: 'key' });
    await call('key delete', 'DELETE', '/api/api-keys/{id}', `/api/api-keys/${k2.id}`);
    await call('key delete again', 'DELETE', '/api/api-keys/{id}', `/api/api-keys/${k2.id}`);
    expect(keyList.statusCode).toBe(200);

    // ---------------- adapters
    await call('adapter types', 'GET', '/api/adapters/types', '/api/adapters/types');
    await call('adapters', 'GET', '/api/adapters', '/api/adapters');
    const adp = await call('adapter create', 'POST', '/api/adapters', '/api/adapters', {
      payload: {
        name: 'a2',
        type: 'smtp',
        config: { host: '127.0.0.1', port: 1 },
        defaultFrom: 'x@example.test',
      },
    });
    const adpId = adp.json().data.id;
    await call('adapter create bad cfg', 'POST', '/api/adapters', '/api/adapters', {
      payload: { name: 'a3', type: 'smtp', config: {} },
    });
    await call('adapter get', 'GET', '/api/adapters/{id}', `/api/adapters/${adpId}`);
    await call('adapter get 404', 'GET', '/api/adapters/{id}', '/api/adapters/adp_nope');
    await call('adapter put', 'PUT', '/api/adapters/{id}', `/api/adapters/${adpId}`, {
      payload: { name: 'a2b' },
    });
    await call('adapter test', 'POST', '/api/adapters/{id}/test', `/api/adapters/${adpId}/test`);
    await call('adapter delete', 'DELETE', '/api/adapters/{id}', `/api/adapters/${adpId}`);

    // ---------------- templates
    await call('tpl list', 'GET', '/api/templates', '/api/templates');
    await call('tpl list key', 'GET', '/api/templates', '/api/templates?pageSize=5&isActive=true', {
      as: 'key',
    });
    await call('tpl list bad', 'GET', '/api/templates', '/api/templates?pageSize=500');
    const tpl = await call('tpl create', 'POST', '/api/templates', '/api/templates', {
      payload: { name: 'T2', subject: 'Hi {{ first_name }}', designJson: simpleDesign() },
    });
    const tplId = tpl.json().data.id;
    await call('tpl create bad design', 'POST', '/api/templates', '/api/templates', {
      payload: { name: 'T3', subject: 'x', designJson: { nope: 1 } },
    });
    await call('tpl create dup slug', 'POST', '/api/templates', '/api/templates', {
      payload: { name: 'T2', slug: tpl.json().data.slug, subject: 'x', designJson: simpleDesign() },
    });
    await call('tpl get', 'GET', '/api/templates/{id}', `/api/templates/${tplId}`);
    await call('tpl get key', 'GET', '/api/templates/{id}', `/api/templates/${tplId}`, { as: 'key' });
    await call('tpl get 404', 'GET', '/api/templates/{id}', '/api/templates/tpl_nope');
    await call('tpl put', 'PUT', '/api/templates/{id}', `/api/templates/${tplId}`, {
      payload: { description: 'd' },
    });
    await call('tpl dup', 'POST', '/api/templates/{id}/duplicate', `/api/templates/${tplId}/duplicate`);
    const ver = await call(
      'tpl ver create',
      'POST',
      '/api/templates/{id}/versions',
      `/api/templates/${tplId}/versions`,
    );
    await call(
      'tpl ver create named',
      'POST',
      '/api/templates/{id}/versions',
      `/api/templates/${tplId}/versions`,
      {
        payload: { name: 'v-named' },
      },
    );
    await call(
      'tpl ver create null body',
      'POST',
      '/api/templates/{id}/versions',
      `/api/templates/${tplId}/versions`,
      {
        headers: { 'content-type': 'application/json' },
        payload: 'null',
      },
    );
    await call(
      'tpl send-test null body',
      'POST',
      '/api/templates/{id}/send-test',
      `/api/templates/${tplId}/send-test`,
      {
        headers: { 'content-type': 'application/json' },
        payload: 'null',
      },
    );
    await call('tpl ver list', 'GET', '/api/templates/{id}/versions', `/api/templates/${tplId}/versions`);
    await call(
      'tpl restore',
      'PUT',
      '/api/templates/{id}/versions/{versionId}/restore',
      `/api/templates/${tplId}/versions/${ver.json().data.id}/restore`,
    );
    await call(
      'tpl restore 404',
      'PUT',
      '/api/templates/{id}/versions/{versionId}/restore',
      `/api/templates/${tplId}/versions/ver_nope/restore`,
    );
    await call('tpl preview', 'POST', '/api/templates/{id}/preview', `/api/templates/${tplId}/preview`, {
      payload: { variables: { first_name: 'A' } },
    });
    await call(
      'tpl preview no body',
      'POST',
      '/api/templates/{id}/preview',
      `/api/templates/${tplId}/preview`,
      {
        payload: {},
      },
    );
    await call('tpl send-test', 'POST', '/api/templates/{id}/send-test', `/api/templates/${tplId}/send-test`);
    await call(
      'tpl send-test key',
      'POST',
      '/api/templates/{id}/send-test',
      `/api/templates/${tplId}/send-test`,
      { as: 'key' },
    );

    // ---------------- send
    const sent = await call('send', 'POST', '/api/v1/send', '/api/v1/send', {
      as: 'key',
      payload: { templateId: team.templateId, to: 'ada@example.test', variables: { first_name: 'Ada' } },
    });
    const emailId = sent.json().data.id;
    await call('send bad tpl', 'POST', '/api/v1/send', '/api/v1/send', {
      as: 'key',
      payload: { templateId: 'tpl_nope', to: 'ada@example.test' },
    });
    await call('send bad body', 'POST', '/api/v1/send', '/api/v1/send', { as: 'key', payload: { to: 1 } });
    await call('send bad key', 'POST', '/api/v1/send', '/api/v1/send', {
      as: 'svc_nope',
      payload: { templateId: team.templateId, to: 'ada@example.test' },
    });
    await call('send no key', 'POST', '/api/v1/send', '/api/v1/send', {
      as: null,
      payload: { templateId: team.templateId, to: 'ada@example.test' },
    });
    await call('send session', 'POST', '/api/v1/send', '/api/v1/send', {
      payload: { templateId: team.templateId, to: 'ada@example.test' },
    });
    await call('batch', 'POST', '/api/v1/send/batch', '/api/v1/send/batch', {
      as: 'key',
      payload: {
        emails: [
          { templateId: team.templateId, to: 'b@example.test' },
          { templateId: 'nope', to: 'c@example.test' },
        ],
      },
    });
    const sched = await call('send scheduled', 'POST', '/api/v1/send', '/api/v1/send', {
      as: 'key',
      payload: {
        templateId: team.templateId,
        to: 'sch@example.test',
        scheduledAt: new Date(Date.now() + 3_600_000).toISOString(),
      },
    });
    await call('cancel', 'POST', '/api/v1/{id}/cancel', `/api/v1/${sched.json().data.id}/cancel`, {
      as: 'key',
    });
    await call('cancel again', 'POST', '/api/v1/{id}/cancel', `/api/v1/${sched.json().data.id}/cancel`, {
      as: 'key',
    });
    await call('status', 'GET', '/api/v1/{id}/status', `/api/v1/${emailId}/status`, { as: 'key' });
    await call('status 404', 'GET', '/api/v1/{id}/status', '/api/v1/eml_nope/status', { as: 'key' });

    // wait for delivery
    await waitFor(async () => {
      const r = await ctx.app.inject({
        method: 'GET',
        url: `/api/v1/${emailId}/status`,
        headers: { 'x-api-key': team.key },
      });
      return r.json().data.status === 'sent' ? true : undefined;
    });
    await call('status sent', 'GET', '/api/v1/{id}/status', `/api/v1/${emailId}/status`, { as: 'key' });

    // ---------------- logs
    await call('logs', 'GET', '/api/logs', '/api/logs');
    await call('logs key', 'GET', '/api/logs', '/api/logs?status=sent', { as: 'key' });
    await call('logs bad', 'GET', '/api/logs', '/api/logs?status=nope');
    await call('log get', 'GET', '/api/logs/{id}', `/api/logs/${emailId}`);
    await call('log get sched', 'GET', '/api/logs/{id}', `/api/logs/${sched.json().data.id}`);
    await call('log get 404', 'GET', '/api/logs/{id}', '/api/logs/eml_nope');
    await call('log events', 'GET', '/api/logs/{id}/events', `/api/logs/${emailId}/events`);
    await call('log recipients', 'GET', '/api/logs/{id}/recipients', `/api/logs/${emailId}/recipients`);
    await call('log rendered', 'GET', '/api/logs/{id}/rendered', `/api/logs/${emailId}/rendered`);
    await call('stats', 'GET', '/api/logs/stats', '/api/logs/stats');
    await call('stats bad', 'GET', '/api/logs/stats', '/api/logs/stats?from=yesterday');
    await call('resend sent', 'POST', '/api/logs/{id}/resend', `/api/logs/${emailId}/resend`);
    await call('resend failed', 'POST', '/api/logs/{id}/resend', `/api/logs/${sched.json().data.id}/resend`);
    await call('resend key', 'POST', '/api/logs/{id}/resend', `/api/logs/${emailId}/resend`, { as: 'key' });

    // ---------------- tracking
    const key = trackingKey(Buffer.alloc(32, 7));
    const open = signTrackingToken(key, { kind: 'open', emailId, teamId: owner.teamId });
    await call('pixel', 'GET', '/t/o/{token}', `/t/o/${open}`, {
      as: null,
      headers: { 'user-agent': 'Mozilla/5.0' },
    });
    await call('pixel bad', 'GET', '/t/o/{token}', '/t/o/nope', { as: null });
    const click = signTrackingToken(key, {
      kind: 'click',
      emailId,
      teamId: owner.teamId,
      url: 'https://example.com/',
    });
    await call('click', 'GET', '/t/c/{token}', `/t/c/${click}`, {
      as: null,
      headers: { 'user-agent': 'Mozilla/5.0' },
    });
    await call('click bad', 'GET', '/t/c/{token}', '/t/c/nope', { as: null });

    // ---------------- provider events
    await call(
      'provider events unknown',
      'POST',
      '/api/provider-events/{adapterId}/{token}',
      `/api/provider-events/adp_nope/${'a'.repeat(43)}`,
      {
        as: null,
        payload: { type: 'x' },
      },
    );
    await call(
      'provider events smtp adapter',
      'POST',
      '/api/provider-events/{adapterId}/{token}',
      `/api/provider-events/${team.adapterId}/${'a'.repeat(43)}`,
      {
        as: null,
        payload: { type: 'x' },
      },
    );

    // ---------------- suppressions
    const sup = await call('sup create', 'POST', '/api/suppressions', '/api/suppressions', {
      payload: { address: 'sup@example.test' },
    });
    await call('sup create dup', 'POST', '/api/suppressions', '/api/suppressions', {
      payload: { address: 'sup@example.test' },
    });
    await call('sup list', 'GET', '/api/suppressions', '/api/suppressions');
    await call('sup list key', 'GET', '/api/suppressions', '/api/suppressions', { as: 'key' });
    await call('sup delete', 'DELETE', '/api/suppressions/{id}', `/api/suppressions/${sup.json().data.id}`);
    await call(
      'sup delete 404',
      'DELETE',
      '/api/suppressions/{id}',
      `/api/suppressions/${sup.json().data.id}`,
    );

    // ---------------- teams
    await call('teams', 'GET', '/api/teams', '/api/teams');
    const newTeam = await call('team create', 'POST', '/api/teams', '/api/teams', {
      payload: { name: 'Second' },
    });
    await call('switch', 'POST', '/api/auth/switch-team', '/api/auth/switch-team', {
      payload: { teamId: owner.teamId },
    });
    await call('switch 404', 'POST', '/api/auth/switch-team', '/api/auth/switch-team', {
      payload: { teamId: 'team_nope' },
    });
    expect(newTeam.statusCode).toBe(201);
    await call('members', 'GET', '/api/team/members', '/api/team/members');
    const viewer = await addTeamMember(app, owner, 'viewer');
    await call('member role', 'PUT', '/api/team/members/{userId}', `/api/team/members/${viewer.userId}`, {
      payload: { role: 'member' },
    });
    await call('member role bad', 'PUT', '/api/team/members/{userId}', `/api/team/members/${viewer.userId}`, {
      payload: { role: 'god' },
    });
    await call('invite', 'POST', '/api/team/invitations', '/api/team/invitations', {
      payload: { email: 'invitee-x@example.test', role: 'member' },
    });
    await call('invite again (renew)', 'POST', '/api/team/invitations', '/api/team/invitations', {
      payload: { email: 'invitee-x@example.test', role: 'member' },
    });
    await call('invitations', 'GET', '/api/team/invitations', '/api/team/invitations');
    // A team without an adapter gets the link in the answer.
    const lone = await setupOwner(app);
    const inv3 = await call('invite (no adapter)', 'POST', '/api/team/invitations', '/api/team/invitations', {
      as: lone,
      payload: { email: 'invitee-y@example.test', role: 'member' },
    });
    const invData = inv3.json().data;
    if (invData?.url) {
      const token = tokenOf(invData.url);
      await call('invitation get', 'GET', '/api/auth/invitations/{token}', `/api/auth/invitations/${token}`, {
        as: null,
      });
      /** `POST /api/auth/invitations/{token}/accept`, unauthenticated, from the app's origin. */
      const accept = (label: string, inviteToken: string, payload: unknown, headers = {}) =>
        call(
          label,
          'POST',
          '/api/auth/invitations/{token}/accept',
          `/api/auth/invitations/${inviteToken}/accept`,
          {
            as: null,
            headers: { ...ORIGIN_HEADERS(app), ...headers },
            payload,
          },
        );
      const newPerson = { name: 'New Person', password: 'password-123456' };
      await accept('invitation accept', token, newPerson);
      const inv4 = await call(
        'invite (no adapter) 2',
        'POST',
        '/api/team/invitations',
        '/api/team/invitations',
        {
          as: lone,
          payload: { email: 'invitee-z@example.test', role: 'member' },
        },
      );
      await accept('invitation accept null body', tokenOf(inv4.json().data.url), 'null', {
        'content-type': 'application/json',
      });
      await accept('invitation accept again', token, newPerson);
    } else problems.push(`invitation create answered no url: ${inv3.body}`);
    await call('invitation get 404', 'GET', '/api/auth/invitations/{token}', '/api/auth/invitations/nope', {
      as: null,
    });
    const inv2 = await buildInvitation(app, owner);
    await call(
      'invitation cancel',
      'DELETE',
      '/api/team/invitations/{id}',
      `/api/team/invitations/${inv2.id}`,
    );
    await call('member remove', 'DELETE', '/api/team/members/{userId}', `/api/team/members/${viewer.userId}`);
    await call(
      'member remove 404',
      'DELETE',
      '/api/team/members/{userId}',
      `/api/team/members/${viewer.userId}`,
    );

    // ---------------- uploads
    const { payload, headers } = await multipartBody([
      { filename: 'a.png', type: 'image/png', bytes: PNG_1X1 },
    ]);
    const up = await call('upload', 'POST', '/api/uploads/images', '/api/uploads/images', {
      payload,
      headers,
    });
    const bad = await multipartBody([{ filename: 'a.txt', type: 'text/plain', bytes: Buffer.from('hello') }]);
    await call('upload bad', 'POST', '/api/uploads/images', '/api/uploads/images', {
      payload: bad.payload,
      headers: bad.headers,
    });
    await call('uploads list', 'GET', '/api/uploads/images', '/api/uploads/images');
    await call('uploads usage', 'GET', '/api/uploads/usage', '/api/uploads/usage');
    const upData = up.json().data;
    await call('file', 'GET', '/files/{path}', pathOf(upData.url), { as: null });
    await call('file 404', 'GET', '/files/{path}', '/files/nope.png', { as: null });
    await call(
      'upload delete',
      'DELETE',
      '/api/uploads/images/{key}',
      `/api/uploads/images/${encodeURIComponent(upData.key)}`,
    );
    await call(
      'upload delete 404',
      'DELETE',
      '/api/uploads/images/{key}',
      `/api/uploads/images/${encodeURIComponent(upData.key)}`,
    );

    // ---------------- webhooks
    const whk = await call('webhook create', 'POST', '/api/webhooks', '/api/webhooks', {
      payload: { name: 'w', url: receiver.url('/w1'), events: ['email.sent', 'email.queued'] },
    });
    const whkId = whk.json().data.id;
    await call('webhook create bad', 'POST', '/api/webhooks', '/api/webhooks', {
      payload: { name: 'w', url: 'nope', events: [] },
    });
    await call('webhooks', 'GET', '/api/webhooks', '/api/webhooks');
    await call('webhook get', 'GET', '/api/webhooks/{id}', `/api/webhooks/${whkId}`);
    await call('webhook put', 'PUT', '/api/webhooks/{id}', `/api/webhooks/${whkId}`, {
      payload: { name: 'w2' },
    });
    await call(
      'webhook rotate',
      'POST',
      '/api/webhooks/{id}/rotate-secret',
      `/api/webhooks/${whkId}/rotate-secret`,
    );
    const test = await call('webhook test', 'POST', '/api/webhooks/{id}/test', `/api/webhooks/${whkId}/test`);
    await call('deliveries', 'GET', '/api/webhooks/{id}/deliveries', `/api/webhooks/${whkId}/deliveries`);
    const deliveryId = test.json().data?.id;
    await call(
      'redeliver',
      'POST',
      '/api/webhooks/{id}/deliveries/{deliveryId}/redeliver',
      `/api/webhooks/${whkId}/deliveries/${deliveryId}/redeliver`,
    );
    await call('webhook delete', 'DELETE', '/api/webhooks/{id}', `/api/webhooks/${whkId}`);
    await call('webhook get 404', 'GET', '/api/webhooks/{id}', `/api/webhooks/${whkId}`);

    // ---------------- bodies the document marks required
    const k3 = (
      await call('key create k3', 'POST', '/api/api-keys', '/api/api-keys', { payload: { name: 'k3' } })
    ).json().data;
    await call('key put no body', 'PUT', '/api/api-keys/{id}', `/api/api-keys/${k3.id}`);
    await call('key put empty', 'PUT', '/api/api-keys/{id}', `/api/api-keys/${k3.id}`, { payload: {} });
    await call('adapter put no body', 'PUT', '/api/adapters/{id}', `/api/adapters/${team.adapterId}`);
    await call('tpl put no body', 'PUT', '/api/templates/{id}', `/api/templates/${team.templateId}`);
    await call(
      'tpl preview no body at all',
      'POST',
      '/api/templates/{id}/preview',
      `/api/templates/${team.templateId}/preview`,
    );
    await call('logs page0', 'GET', '/api/logs', '/api/logs?page=0');

    // ---------------- templates delete (last) and sign-out
    await call('tpl delete key', 'DELETE', '/api/templates/{id}', `/api/templates/${tplId}`, { as: 'key' });
    await call('tpl delete 404', 'DELETE', '/api/templates/{id}', `/api/templates/${tplId}`);
    const expired = await call('key create expiring', 'POST', '/api/api-keys', '/api/api-keys', {
      payload: {
        name: 'exp',
        scopes: ['send', 'logs:read'],
        expiresAt: new Date(Date.now() + 1500).toISOString(),
      },
    });
    await new Promise((r) => setTimeout(r, 2000));
    await call('status expired key', 'GET', '/api/v1/{id}/status', `/api/v1/${emailId}/status`, {
      as: expired.json().data.key,
    });
    const narrow = await call('key create narrow', 'POST', '/api/api-keys', '/api/api-keys', {
      payload: { name: 'narrow', scopes: ['logs:read'] },
    });
    await call('send wrong scope', 'POST', '/api/v1/send', '/api/v1/send', {
      as: narrow.json().data.key,
      payload: { templateId: team.templateId, to: 'ada@example.test' },
    });
    await call('tpl list wrong scope', 'GET', '/api/templates', '/api/templates', {
      as: narrow.json().data.key,
    });
    await call('sign-out anon', 'POST', '/api/auth/sign-out', '/api/auth/sign-out', {
      as: null,
      headers: ORIGIN_HEADERS(app),
    });
    await call('sign-out', 'POST', '/api/auth/sign-out', '/api/auth/sign-out', {
      headers: ORIGIN_HEADERS(app),
    });

    const unvisited = Object.entries(doc.paths).flatMap(([path, ops]) =>
      Object.keys(ops)
        .map((method) => `${method.toUpperCase()} ${path}`)
        .filter((op) => !seen.has(op)),
    );
    expect(problems).toEqual([]);
    // Every documented operation was called at least once.
    expect(unvisited).toEqual([]);
  });

  it('documents every route the app answers under a valid path template, with a success answer and the error envelope', () => {
    const documented = new Set(
      Object.entries(doc.paths).flatMap(([path, ops]) =>
        Object.keys(ops).map((method) => `${method.toUpperCase()} ${shapeOf(path)}`),
      ),
    );
    // The app's routes, but HEAD (Fastify's automatic twins of GET), the reference UI itself and
    // the auth library's catch-all (its open endpoints are checked below, one by one).
    const routes = ctx.app.ctx.routes.filter(
      (route) => route.method !== 'HEAD' && !route.url.startsWith('/docs') && route.url !== '/api/auth/*',
    );
    expect(routes.length).toBeGreaterThan(60);
    const undocumented = routes
      .map((route) => `${route.method} ${shapeOf(route.url)}`)
      .filter((op) => !documented.has(op));
    expect(undocumented).toEqual([]);
    // Every endpoint of the auth library that is open over HTTP, the providers' callbacks too.
    const openAuth = [...OPEN_AUTH_PATHS, '/callback/{provider}'].map((path) => `/api/auth${path}`);
    expect(openAuth.filter((path) => !doc.paths[path])).toEqual([]);

    const invalid: string[] = [];
    for (const [path, ops] of Object.entries(doc.paths)) {
      const inPath = [...path.matchAll(/\{([^}]*)\}/g)].map((match) => match[1]!);
      for (const [method, op] of Object.entries(ops)) {
        const where = `${method.toUpperCase()} ${path}`;
        const declared = (op.parameters ?? [])
          .filter((parameter) => parameter.in === 'path')
          .map((parameter) => parameter.name);
        if (inPath.some((name) => !/^[A-Za-z_][A-Za-z0-9_]*$/.test(name))) invalid.push(`${where}: bad name`);
        if ([...declared].sort().join() !== [...inPath].sort().join()) {
          invalid.push(`${where}: path parameters ${declared} for the template's ${inPath}`);
        }
        const codes = Object.keys(op.responses ?? {});
        // Sign-up is always refused (accounts come from setup and invitations).
        const alwaysRefused = path === '/api/auth/sign-up/email';
        if (!alwaysRefused && !codes.some((code) => /^[23]/.test(code)))
          invalid.push(`${where}: no success answer`);
        if (!codes.includes('4XX') || !codes.includes('5XX')) invalid.push(`${where}: no 4XX/5XX`);
      }
    }
    expect(invalid).toEqual([]);

    // OpenAPI 3.0: `nullable` does not add null to an enum; every nullable enum lists it itself.
    const nullableEnums: unknown[] = [];
    const visit = (node: unknown): void => {
      if (!node || typeof node !== 'object') return;
      const schema = node as { nullable?: unknown; enum?: unknown[] };
      if (schema.nullable === true && Array.isArray(schema.enum)) nullableEnums.push(schema.enum);
      for (const value of Object.values(node)) visit(value);
    };
    visit(doc);
    expect(nullableEnums.length).toBeGreaterThan(0);
    for (const values of nullableEnums) expect(values).toContain(null);
  });

  it('describes a batch item as the send body, each adapter type config, and the API key defaults', async () => {
    const owner = await setupOwner(ctx.app);
    const bodyOf = (path: string, method: string) =>
      doc.paths[path]![method]!.requestBody!.content!['application/json']!.schema as {
        properties: Record<string, Schema & { items?: Schema; anyOf?: Schema[] }>;
      };
    const { description, ...item } = bodyOf('/api/v1/send/batch', 'post').properties.emails!.items!;
    expect(description).toBe('A body of POST /api/v1/send');
    expect(item).toEqual(bodyOf('/api/v1/send', 'post'));

    // The config of each adapter type, as the spec's table gives it: an SMTP config without its
    // host and port is refused by the document as by the server.
    const config = bodyOf('/api/adapters', 'post').properties.config!;
    expect(config.anyOf?.map((schema) => schema.title)).toEqual([
      'mailapi_a',
      'mailapi_b',
      'mailapi_domain',
      'mailapi_cloud',
      'mailapi_server',
      'smtp',
    ]);
    const smtpConfig = config.anyOf!.find((schema) => schema.title === 'smtp')!;
    expect(smtpConfig.required).toEqual(['host', 'port']);
    const mailgun = config.anyOf!.find((schema) => schema.title === 'mailapi_domain')! as {
      properties: Record<string, Schema>;
    };
    expect(mailgun.properties.region).toMatchObject({ enum: ['us', 'eu'], default: 'us' });
    const validConfig = ajv.compile(config);
    expect(validConfig({})).toBe(false);
    expect(validConfig({ host: 'mail.example.test', port: 587 })).toBe(true);
    const refused = await ctx.app.inject({
      method: 'POST',
      url: '/api/adapters',
      headers: sessionHeaders(ctx.app, owner),
      payload: { name: 'No host', type: 'smtp', config: {} },
    });
    expect(refused.statusCode).toBe(400);
    expect(bodyOf('/api/adapters/{id}', 'put').properties.config!.anyOf).toEqual(config.anyOf);

    // The defaults the document gives are the ones a key made without them gets.
    const keyBody = bodyOf('/api/api-keys', 'post').properties;
    expect(keyBody.scopes?.default).toEqual(['send']);
    expect(keyBody.rateLimit?.default).toBe(100);
    const created = await ctx.app.inject({
      method: 'POST',
      url: '/api/api-keys',
      headers: sessionHeaders(ctx.app, owner),
      payload: { name: 'Defaults' },
    });
    expect(created.json().data).toMatchObject({ scopes: ['send'], rateLimit: 100 });
  });
});

describe('the documented session cookie on an https BASE_URL', () => {
  let ctx: TestContext;
  beforeAll(async () => {
    ctx = await createTestContext('postgres', { BASE_URL: 'https://mail.example.test' });
  });
  afterAll(() => ctx?.close());

  it('names the cookie the server sets and reads', async () => {
    const owner = await setupOwner(ctx.app);
    const doc = await documentOf(ctx);
    const documented = doc.components.securitySchemes.session!.name;
    const [setName, ...value] = owner.cookie.split(';')[0]!.split('=');
    expect(setName).toBe('__Secure-postwright.session_token');
    const me = (cookieName: string) =>
      ctx.app.inject({
        method: 'GET',
        url: '/api/auth/me',
        headers: { cookie: `${cookieName}=${value.join('=')}` },
      });
    expect((await me(setName!)).statusCode).toBe(200);
    expect(documented).toBe(setName);
    expect((await me(documented)).statusCode).toBe(200);
    expect(doc.paths['/api/auth/sign-in/email']!.post!).toMatchObject({
      description: expect.stringContaining(`${setName} when BASE_URL is https`),
    });
  });
});
