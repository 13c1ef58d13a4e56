import { connect } from 'node:net';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { createTestContext, type TestContext } from './helpers/app.ts';
import { sessionHeaders, setupOwner, type TeamOwner } from './helpers/auth.ts';
import { buildTemplate, expectError, send } from './helpers/factories.ts';
import { createTeamWithKey } from './helpers/sending-team.ts';

/**
 * Review finding, session 18 (input sweep): bad or odd client input on every HTTP route. Each case
 * is what a client notices: the status, the error code, and a message or path that says what to fix.
 */
describe('input edges: bodies, queries and raw requests', () => {
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

  /** A signed-in JSON request with `body` sent as written (escapes such as `\ud800` kept). */
  const call = (method: 'GET' | 'POST' | 'PUT', url: string, body?: string) =>
    ctx.app.inject({
      method,
      url,
      headers: {
        ...sessionHeaders(ctx.app, owner),
        ...(body === undefined ? {} : { 'content-type': 'application/json' }),
      },
      ...(body === undefined ? {} : { payload: body }),
    });

  /** The raw bytes a listening instance answers `request` with, up to the connection's close. */
  async function rawExchange(request: string): Promise<string> {
    const address = ctx.app.server.listening
      ? `http://127.0.0.1:${(ctx.app.server.address() as { port: number }).port}`
      : await ctx.app.listen({ port: 0, host: '127.0.0.1' });
    const { port } = new URL(address);
    return new Promise<string>((resolve, reject) => {
      const socket = connect(Number(port), '127.0.0.1', () => socket.write(request));
      let data = '';
      socket.on('data', (chunk) => {
        data += chunk.toString();
      });
      socket.on('close', () => resolve(data));
      socket.on('error', reject);
    });
  }

  /** Status line and parsed JSON body of a raw HTTP/1.1 response with Content-Length. */
  function parseRaw(raw: string): { statusLine: string; headers: string; body: any } {
    const split = raw.indexOf('\r\n\r\n');
    const head = raw.slice(0, split);
    return {
      statusLine: head.split('\r\n')[0] ?? '',
      headers: head.toLowerCase(),
      body: JSON.parse(raw.slice(split + 4)),
    };
  }

  it('lists and counts logs up to the last allowed day, to=9999-12-31', async () => {
    // Its next midnight is in year 10000: the request failed as "data the database cannot store".
    const team = await createTeamWithKey(ctx.app);
    const accepted = await send(ctx.app, team.key, { templateId: team.templateId, to: 'a@example.test' });
    expect(accepted.statusCode, accepted.body).toBe(202);
    const get = (url: string) =>
      ctx.app.inject({ method: 'GET', url, headers: sessionHeaders(ctx.app, team.owner) });
    for (const range of ['to=9999-12-31', 'from=1970-01-01&to=9999-12-31']) {
      const list = await get(`/api/logs?${range}`);
      expect(list.statusCode, list.body).toBe(200);
      expect(list.json().data.items.map((item: { id: string }) => item.id)).toEqual([
        accepted.json().data.id,
      ]);
      const stats = await get(`/api/logs/stats?${range}`);
      expect(stats.statusCode, stats.body).toBe(200);
      expect(stats.json().data.total).toBe(1);
    }
    // The day before still bounds the range.
    expect((await get('/api/logs/stats?to=9999-12-30')).json().data.total).toBe(1);
    expect((await get('/api/logs/stats?to=1970-01-01')).json().data.total).toBe(0);
  });

  it('refuses a string or key with an unpaired surrogate on any JSON route, naming its path', async () => {
    const template = await buildTemplate(ctx.app, owner);
    const cases: [method: 'POST' | 'PUT', url: string, body: string, path: string][] = [
      ['POST', '/api/api-keys', '{"name":"ab\\ud800cd"}', 'body.name'],
      ['PUT', `/api/templates/${template.id}`, '{"subject":"Hi \\ud800 {{ first_name }}"}', 'body.subject'],
      ['PUT', `/api/templates/${template.id}`, '{"description":"\\udfff"}', 'body.description'],
      ['POST', '/api/suppressions', '{"address":"x2@example.test","reason":"\\ud800"}', 'body.reason'],
      [
        'POST',
        '/api/webhooks',
        '{"name":"w","url":"https://example.test","events":["\\udc00"]}',
        'body.events.0',
      ],
      ['POST', '/api/auth/setup', '{"name":"\\ud800","teamName":"t"}', 'body.name'],
      // better-auth's own endpoints, which read the raw body (auth.mount.ts).
      ['POST', '/api/auth/update-user', '{"name":"ab\\ud800"}', 'body.name'],
    ];
    for (const [method, url, body, path] of cases) {
      const error = expectError(await call(method, url, body), 400, 'VALIDATION_ERROR');
      expect(error.details.issues).toEqual([
        { path, message: expect.stringContaining('well-formed Unicode') },
      ]);
    }
    // A key: the path of its object.
    const key = expectError(
      await call('POST', '/api/templates', '{"name":"n","subject":"s","designJson":{"root":{"\\ud800":1}}}'),
      400,
      'VALIDATION_ERROR',
    );
    expect(key.details.issues).toEqual([
      { path: 'body.designJson.root', message: expect.stringContaining('key that is not well-formed') },
    ]);
    // Nothing was stored; a surrogate pair written as escapes is a character like any other.
    const stored = await call('GET', `/api/templates/${template.id}`);
    expect(stored.json().data.subject).toBe('Hi {{ first_name }}');
    const me = await call('GET', '/api/auth/get-session');
    expect(me.json().user.name).not.toContain('\ufffd');
    const pair = await call('POST', '/api/api-keys', '{"name":"key \\ud83d\\ude00"}');
    expect(pair.statusCode, pair.body).toBe(201);
    expect(pair.json().data.name).toBe('key 😀');
  });

  it('refuses __proto__ and constructor.prototype keys with FORBIDDEN_KEY naming the key', async () => {
    const proto = expectError(
      await call('POST', '/api/templates', '{"name":"x","subject":"s","designJson":{"__proto__":{"a":1}}}'),
      400,
      'INVALID_INPUT',
    );
    expect(proto.details).toEqual({ reason: 'FORBIDDEN_KEY', path: 'body.designJson.__proto__' });
    expect(proto.message).toContain('"__proto__"');
    const ctor = expectError(
      await call('POST', '/api/api-keys', '{"name":{"constructor":{"prototype":{"y":1}}}}'),
      400,
      'INVALID_INPUT',
    );
    expect(ctor.details).toEqual({ reason: 'FORBIDDEN_KEY', path: 'body.name.constructor.prototype' });
    expect(ctor.message).toContain('"constructor.prototype"');
    // Malformed JSON is still reported as such.
    const malformed = expectError(await call('POST', '/api/api-keys', '{"__proto__":'), 400, 'INVALID_INPUT');
    expect(malformed.details).toEqual({ reason: 'MALFORMED_JSON' });
    expect(({} as Record<string, unknown>).a).toBeUndefined();
  });

  it('takes query integers in decimal digits only, once, and says so otherwise', async () => {
    const issueOf = async (url: string) => {
      const error = expectError(await call('GET', url), 400, 'VALIDATION_ERROR');
      expect(error.details.issues).toHaveLength(1);
      return error.details.issues[0] as { path: string; message: string };
    };
    for (const url of [
      '/api/templates?page=1&page=2',
      '/api/logs?pageSize=5&pageSize=5',
      '/api/suppressions?page=1&page=1',
      '/api/uploads/images?pageSize=1&pageSize=2',
      '/api/webhooks/wh_none/deliveries?limit=1&limit=2',
    ]) {
      const issue = await issueOf(url);
      expect(issue.message, url).toBe('must be given once');
      expect(issue.path, url).toMatch(/^querystring\.(page|pageSize|limit)$/);
    }
    for (const query of ['page=', 'page=0x10', 'page=%201', 'page=1.0', 'page=-1', 'page=0']) {
      expect(await issueOf(`/api/templates?${query}`), query).toEqual({
        path: 'querystring.page',
        message: 'must be a positive integer',
      });
    }
    for (const query of ['pageSize=1e2', 'pageSize=', 'pageSize=101']) {
      expect(await issueOf(`/api/logs?${query}`), query).toEqual({
        path: 'querystring.pageSize',
        message: 'must be an integer from 1 to 100',
      });
    }
    expect((await issueOf('/api/webhooks/wh_none/deliveries?limit=1001')).message).toBe(
      'must be an integer from 1 to 1000',
    );
    const listed = await call('GET', '/api/templates?page=02&pageSize=5');
    expect(listed.statusCode, listed.body).toBe(200);
    expect(listed.json().data).toMatchObject({ page: 2, pageSize: 5 });
    expect((await call('GET', '/api/templates')).json().data).toMatchObject({ page: 1, pageSize: 20 });
    // The API reference still shows integers with their bounds and defaults.
    const document = (await ctx.app.inject({ method: 'GET', url: '/docs/json' })).json();
    const parameters = document.paths['/api/templates'].get.parameters;
    expect(parameters.find((p: { name: string }) => p.name === 'pageSize').schema).toEqual({
      type: 'integer',
      minimum: 1,
      maximum: 100,
      default: 20,
    });
  });

  it('says what is wrong with a recipient list, tags or a log range bound, not just "Invalid input"', async () => {
    // Review finding, session 22: a field that takes one of two shapes (an address or a list,
    // labels or a map, a date or a date-time) answered any mistake with zod's bare "Invalid input".
    const team = await createTeamWithKey(ctx.app);
    const issuesOf = async (response: { statusCode: number; body: string; json: () => any }) =>
      expectError(response, 400, 'VALIDATION_ERROR').details.issues;
    const sendWith = (extra: Record<string, unknown>) =>
      send(ctx.app, team.key, { templateId: team.templateId, to: 'a@example.test', ...extra });
    const many = Array.from({ length: 51 }, (_, i) => `r${i}@example.test`);
    expect(await issuesOf(await sendWith({ to: many }))).toEqual([
      { path: 'body.to', message: 'Too big: expected array to have <=50 items' },
    ]);
    expect(await issuesOf(await sendWith({ cc: many }))).toEqual([
      { path: 'body.cc', message: 'Too big: expected array to have <=50 items' },
    ]);
    expect(await issuesOf(await sendWith({ to: 5 }))).toEqual([
      { path: 'body.to', message: 'must be an email address or a list of them' },
    ]);
    expect(await issuesOf(await sendWith({ tags: { 'a b': 'c' } }))).toEqual([
      { path: 'body.tags', message: 'Invalid key in record: "a b"' },
    ]);
    expect(await issuesOf(await sendWith({ tags: 'x' }))).toEqual([
      { path: 'body.tags', message: 'must be a list of labels or an object of label names to values' },
    ]);
    // A batch item says the same at its own path.
    const batch = await ctx.app.inject({
      method: 'POST',
      url: '/api/v1/send/batch',
      headers: { 'x-api-key': team.key },
      payload: { emails: [{ templateId: team.templateId, to: many }] },
    });
    expect(batch.statusCode, batch.body).toBe(202);
    expect(batch.json().data.results[0].error.details.issues).toEqual([
      { path: 'body.emails.0.to', message: 'Too big: expected array to have <=50 items' },
    ]);
    for (const url of ['/api/logs?from=2026-13-01', '/api/logs/stats?to=2026-01-01T24:00:00Z']) {
      const [issue] = await issuesOf(await call('GET', url));
      expect(issue.message, url).toBe(
        'must be an ISO 8601 date (2026-11-27) or date-time with its offset (2026-11-27T10:00:00Z)',
      );
    }
  });

  it('reports a value of the wrong type once, without the length checks of the type it should have', async () => {
    // Review finding, session 22: `"name": []` also got "Too small: expected array to have >=1
    // items", as if an array were wanted (zod 4 still runs a string's checks on another type).
    const error = expectError(await call('POST', '/api/api-keys', '{"name":[]}'), 400, 'VALIDATION_ERROR');
    expect(error.details.issues).toEqual([
      { path: 'body.name', message: 'Invalid input: expected string, received array' },
    ]);
    const team = await createTeamWithKey(ctx.app);
    const batch = await ctx.app.inject({
      method: 'POST',
      url: '/api/v1/send/batch',
      headers: { 'x-api-key': team.key },
      payload: { emails: [{ templateId: team.templateId, to: 'a@example.test', from: ['a'] }] },
    });
    expect(batch.statusCode, batch.body).toBe(202);
    expect(batch.json().data.results[0].error.details.issues).toEqual([
      { path: 'body.emails.0.from', message: 'Invalid input: expected string, received array' },
    ]);
  });

  it('answers an unknown Expect header with 400 in the envelope', async () => {
    const raw = await rawExchange(
      'POST /healthz HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 2\r\nExpect: nope\r\n\r\n{}',
    );
    const { statusLine, headers, body } = parseRaw(raw);
    expect(statusLine).toMatch(/^HTTP\/1\.1 400 /);
    expect(headers).toContain('content-type: application/json; charset=utf-8');
    expect(body).toEqual({
      success: false,
      error: {
        code: 'INVALID_INPUT',
        message: expect.stringContaining('Expect'),
        details: { reason: 'EXPECTATION_FAILED' },
      },
    });
  });

  it('answers CONNECT with 400 in the envelope', async () => {
    const raw = await rawExchange('CONNECT evil.test:443 HTTP/1.1\r\nHost: evil.test\r\n\r\n');
    const { statusLine, body } = parseRaw(raw);
    expect(statusLine).toMatch(/^HTTP\/1\.1 400 /);
    expect(body).toEqual({
      success: false,
      error: {
        code: 'INVALID_INPUT',
        message: 'CONNECT is not supported',
        details: { reason: 'UNSUPPORTED_METHOD' },
      },
    });
    // The server goes on answering.
    expect((await ctx.app.inject({ method: 'GET', url: '/healthz' })).statusCode).toBe(200);
  });
});
