import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { createTestContext, type TestContext } from './helpers/app.ts';
import { sessionHeaders, setupOwner, type TeamOwner } from './helpers/auth.ts';
import {
  buildApiKey,
  buildSmtpAdapter,
  buildTemplate,
  expectError,
  simpleDesign,
} from './helpers/factories.ts';
import { closedPort } from './helpers/smtp-server.ts';

type Block = { type: string; data: Record<string, unknown> };
type Response = { statusCode: number; body: string; json: () => any };

/** Hard bound of these tests: a wide margin over issue #4's 100 ms target. */
const BOUND_MS = 1000;
/** Runs of one request before a time over the bound fails the test (see `timed`). */
const ATTEMPTS = 3;
/** 10 MB of text: fits in the 10 MiB body limit with the JSON around it. */
const TEN_MB = 10_000_000;
const SCRIPT = '<script>alert(1)</script><img src=x onerror=alert(2)>';

function design(blocks: Record<string, Block>, rootChildren = Object.keys(blocks)): Record<string, Block> {
  return { root: { type: 'EmailLayout', data: { childrenIds: rootChildren } }, ...blocks };
}
const text = (value: string, props: Record<string, unknown> = {}): Block => ({
  type: 'Text',
  data: { props: { text: value, ...props } },
});

/** Containers nested `depth` deep with a Text block at the bottom. */
function nestedContainers(depth: number): Record<string, Block> {
  const blocks: Record<string, Block> = {};
  for (let level = 1; level <= depth; level++) {
    const child = level === depth ? 'leaf' : `c${level + 1}`;
    blocks[`c${level}`] = { type: 'Container', data: { props: { childrenIds: [child] } } };
  }
  blocks.leaf = text('deep');
  return design(blocks, ['c1']);
}

const HOSTILE_SAVES: Record<string, { subject?: string; designJson: Record<string, Block>; reason: string }> =
  {
    'a (1..100000000) loop in a Text block': {
      designJson: simpleDesign('{% for i in (1..100000000) %}{{ i }}{% endfor %}'),
      reason: 'LIMIT_EXCEEDED',
    },
    'a (1..100000000) loop in the subject': {
      subject: '{% for i in (1..100000000) %}{{ i }}{% endfor %}',
      designJson: simpleDesign('hi'),
      reason: 'LIMIT_EXCEEDED',
    },
    'nested loops of 10^9 iterations': {
      designJson: simpleDesign(
        '{% for a in (1..1000) %}{% for b in (1..1000) %}{% for c in (1..1000) %}{% endfor %}{% endfor %}{% endfor %}',
      ),
      reason: 'LIMIT_EXCEEDED',
    },
    'a string doubled 30 times': {
      designJson: simpleDesign(
        '{% assign s = "xxxxxxxxxx" %}{% for i in (1..30) %}{% assign s = s | append: s %}{% endfor %}{{ s }}',
      ),
      reason: 'LIMIT_EXCEEDED',
    },
    'a loop writing 10 MB': {
      designJson: simpleDesign(`{% for i in (1..10000) %}${'x'.repeat(1000)}{% endfor %}`),
      reason: 'LIMIT_EXCEEDED',
    },
    // Review findings, session 16: liquidjs's variable analysis scanned the string from its start
    // for every variable (32,000 hidden under `if false`: about 9 s of a blocked event loop), and
    // nested computed indexes made O(depth²) characters of variable paths, or a stack overflow (500).
    '9,000 variables under {% if false %}, spread over 600 KB of text': {
      designJson: simpleDesign(
        `{% if false %}${Array.from({ length: 9_000 }, (_, i) => `${'x'.repeat(60)}{{v${i}}}`).join('')}{% endif %}`,
      ),
      reason: 'LIMIT_EXCEEDED',
    },
    '16,000 variables under {% if false %}': {
      designJson: simpleDesign(
        `{% if false %}${Array.from({ length: 16_000 }, (_, i) => `{{v${i}}}`).join('')}{% endif %}`,
      ),
      reason: 'LIMIT_EXCEEDED',
    },
    // Each line of a {% liquid %} tag is a tag (review finding, session 16: 140,000 lines of
    // `echo a` took 21 s to parse at save).
    '20,000 lines of a {% liquid %} tag': {
      designJson: simpleDesign(`{% liquid\n${'echo a\n'.repeat(20_000)}%}`),
      reason: 'LIMIT_EXCEEDED',
    },
    'an index nested 1,000 deep': {
      designJson: simpleDesign(`{{ ${'a['.repeat(1000)}b${']'.repeat(1000)} }}`),
      reason: 'LIMIT_EXCEEDED',
    },
    'an index nested 3,000 deep': {
      designJson: simpleDesign(`{{ ${'a['.repeat(3000)}b${']'.repeat(3000)} }}`),
      reason: 'LIMIT_EXCEEDED',
    },
    'containers nested 500 deep': { designJson: nestedContainers(500), reason: 'INVALID_DESIGN' },
    'a 10 MB string literal in a Text block': {
      designJson: simpleDesign('x'.repeat(TEN_MB)),
      reason: 'LIMIT_EXCEEDED',
    },
  };

describe('hostile templates through HTTP', () => {
  let ctx: TestContext;
  let owner: TeamOwner;
  const timings: Record<string, { wallMs: number; cpuMs: number; attempts: number }> = {};
  /** A dashboard request; a string payload is sent as JSON as it is (serialised outside timings). */
  const call = (method: 'POST' | 'PUT' | 'GET', url: string, payload?: object | string) =>
    ctx.app.inject({
      method,
      url,
      headers: { ...sessionHeaders(ctx.app, owner), 'content-type': 'application/json' },
      ...(payload ? { payload } : {}),
    });
  /**
   * Runs `request`, expecting a 400, and asserts the hard bound on its wall time. On a busy machine (parallel test
   * files, other processes) one run can be descheduled for longer than the bound, so a run over it
   * is retried, up to {@link ATTEMPTS} times: a renderer that really stalls fails every attempt.
   * Records the fastest wall time and that run's CPU time of this process (app.inject runs the
   * server in-process), which other processes do not inflate.
   */
  const timed = async (label: string, request: () => Promise<Response>) => {
    let fastest: { wallMs: number; cpuMs: number; response: Response } | undefined;
    for (let attempt = 1; attempt <= ATTEMPTS && !(fastest && fastest.wallMs < BOUND_MS); attempt++) {
      const cpuBefore = process.cpuUsage();
      const started = performance.now();
      const response = await request();
      const wallMs = Math.round(performance.now() - started);
      const cpu = process.cpuUsage(cpuBefore);
      const cpuMs = Math.round((cpu.user + cpu.system) / 1000);
      expect(response.statusCode, response.body).toBe(400);
      if (!fastest || wallMs < fastest.wallMs) fastest = { wallMs, cpuMs, response };
      timings[label] = { wallMs: fastest.wallMs, cpuMs: fastest.cpuMs, attempts: attempt };
    }
    expect(fastest!.wallMs, `${label} took ${fastest!.wallMs} ms`).toBeLessThan(BOUND_MS);
    return fastest!.response;
  };
  const previewData = async (templateId: string, variables: Record<string, unknown>) => {
    const response = await call('POST', `/api/templates/${templateId}/preview`, { variables });
    expect(response.statusCode, response.body).toBe(200);
    return response.json().data as { html: string; subject: string; text: string };
  };

  beforeAll(async () => {
    ctx = await createTestContext('postgres');
  });
  // Every case gets a team of its own (CONVENTIONS.md); the app and database are the file's.
  beforeEach(async () => {
    owner = await setupOwner(ctx.app);
  });
  afterAll(async () => {
    const lines = Object.entries(timings).map(
      ([label, t]) => `${label}: ${t.wallMs} ms wall, ${t.cpuMs} ms CPU, ${t.attempts} attempt(s)`,
    );
    console.info(`hostile template timings (through app.inject):\n${lines.join('\n')}`);
    await ctx?.close();
  });

  describe('refused at save', () => {
    it.each(Object.entries(HOSTILE_SAVES))(
      'create with %s → 400 INVALID_TEMPLATE',
      async (label, hostile) => {
        const body = JSON.stringify({ name: 'Hostile', subject: 'Hi', ...hostile });
        const response = await timed(`create: ${label}`, () => call('POST', '/api/templates', body));
        const error = expectError(response, 400, 'INVALID_TEMPLATE');
        expect(error.details.reason).toBe(hostile.reason);
        expect(error.details.issues.length).toBeGreaterThan(0);
      },
    );

    it.each(Object.entries(HOSTILE_SAVES))(
      'update with %s → 400, template unchanged',
      async (label, hostile) => {
        const template = await buildTemplate(ctx.app, owner, { name: 'Target' });
        const before = (await call('GET', `/api/templates/${template.id}`)).json().data;
        const body = JSON.stringify({ subject: 'Hi', ...hostile });
        const response = await timed(`update: ${label}`, () =>
          call('PUT', `/api/templates/${template.id}`, body),
        );
        expect(expectError(response, 400, 'INVALID_TEMPLATE').details.reason).toBe(hostile.reason);
        expect((await call('GET', `/api/templates/${template.id}`)).json().data).toEqual(before);
      },
    );

    it('stored none of them', async () => {
      const list = (await call('GET', '/api/templates?search=hostile')).json().data;
      expect(list.total).toBe(0);
    });
  });

  describe('refused at preview and send (the variables make them hostile)', () => {
    let templateId: string;
    beforeEach(async () => {
      templateId = (
        await buildTemplate(ctx.app, owner, {
          name: 'Innocent looking',
          designJson: simpleDesign(
            '{{ note }}|{% for item in items %}{{ item }}{% endfor %}|{% for i in (1..count) %}.{% endfor %}',
          ),
        })
      ).id;
    });

    /** Variables over the size limits are refused by validation (issue #8), the rest by the renderer. */
    const hostileVariables: Record<string, { variables: () => Record<string, unknown>; code: string }> = {
      'a 10 MB variable value': { variables: () => ({ note: 'x'.repeat(TEN_MB) }), code: 'VALIDATION_ERROR' },
      'a loop over a 1,000,000-item array': {
        variables: () => ({ items: new Array(1_000_000).fill(0) }),
        code: 'VALIDATION_ERROR',
      },
      'a (1..count) loop with count 100000000': {
        variables: () => ({ count: 100_000_000 }),
        code: 'INVALID_TEMPLATE',
      },
    };

    it.each(Object.keys(hostileVariables))('preview with %s → 400', async (label) => {
      const { variables, code } = hostileVariables[label]!;
      const body = JSON.stringify({ variables: variables() });
      const response = await timed(`preview: ${label}`, () =>
        call('POST', `/api/templates/${templateId}/preview`, body),
      );
      const error = expectError(response, 400, code);
      if (code === 'INVALID_TEMPLATE') expect(error.details.reason).toBe('LIMIT_EXCEEDED');
      else expect(error.details.issues[0].path).toMatch(/^body\.variables/);
    });

    it('still previews with ordinary variables afterwards', async () => {
      const result = await previewData(templateId, { note: 'ok', items: [1, 2], count: 3 });
      expect(result.html).toContain('ok|12|...');
    });

    it('send with a 10 MB variable value → 400 VALIDATION_ERROR before anything is queued', async () => {
      const key = (await buildApiKey(ctx.app, owner)).key;
      await buildSmtpAdapter(ctx.app, owner, await closedPort()); // never contacted: the send is refused first
      const payload = JSON.stringify({
        templateId,
        to: 'x@example.test',
        variables: { note: 'x'.repeat(TEN_MB) },
      });
      const response = await timed('send: a 10 MB variable value', () =>
        ctx.app.inject({
          method: 'POST',
          url: '/api/v1/send',
          headers: { 'x-api-key': key, 'content-type': 'application/json' },
          payload,
        }),
      );
      expect(expectError(response, 400, 'VALIDATION_ERROR').details.issues[0].path).toBe('body.variables');
      const logs = (await call('GET', '/api/logs')).json().data;
      expect(logs.total).toBe(0);
    });
  });

  it('prototype access renders nothing', async () => {
    const template = await buildTemplate(ctx.app, owner, {
      name: 'Prototype probe',
      subject: '[{{ constructor.constructor }}][{{ __proto__ }}]',
      designJson: simpleDesign(
        'A[{{ constructor.constructor }}]B[{{ __proto__ }}]C[{{ user.constructor.name }}]' +
          'D[{{ user.__proto__ }}]E[{{ items.constructor }}]F[{{ user.toString }}]G[{{ user.hasOwnProperty }}]H',
      ),
    });
    const result = await previewData(template.id, { user: { name: 'u' }, items: [1] });
    expect(result.html).toContain('A[]B[]C[]D[]E[]F[]G[]H');
    expect(result.subject).toBe('[][]');
    for (const leak of ['function', '[object', 'native code', 'Object'])
      expect(result.html).not.toContain(leak);
  });

  it('refuses __proto__ and constructor.prototype keys in the request body', async () => {
    for (const body of [
      '{"variables":{"__proto__":{"polluted":"yes"}}}',
      '{"variables":{"constructor":{"prototype":{"polluted":"yes"}}}}',
    ]) {
      const response = await call('POST', '/api/templates/no-such-template/preview', body);
      expectError(response, 400, 'INVALID_INPUT');
    }
    expect(({} as Record<string, unknown>).polluted).toBeUndefined();
  });

  it('escapes script injected through variables in every block type and drops javascript: URLs', async () => {
    const template = await buildTemplate(ctx.app, owner, {
      name: 'Injection probe',
      subject: 'S {{ v }}',
      designJson: design({
        t: text('T[{{ v }}]'),
        m: text('M[{{ v }}]', { markdown: true }),
        h: { type: 'Heading', data: { props: { text: 'H[{{ v }}]', level: 'h2' } } },
        x: { type: 'Html', data: { props: { contents: '<p>X[{{ v }}]</p>' } } },
        b: { type: 'Button', data: { props: { text: 'B[{{ v }}]', url: '{{ url }}' } } },
        i: { type: 'Image', data: { props: { url: '{{ url }}', alt: '{{ v }}', linkHref: '{{ url }}' } } },
      }),
    });
    const result = await previewData(template.id, { v: SCRIPT, url: ' JavaScript:alert(3)' });
    expect(result.html).not.toMatch(/<script/i);
    expect(result.html).not.toMatch(/<img src=x/i);
    expect(result.html.toLowerCase()).not.toContain('javascript:');
    for (const marker of ['T', 'H', 'X', 'B']) {
      expect(result.html).toContain(
        `${marker}[&lt;script&gt;alert(1)&lt;/script&gt;&lt;img src=x onerror=alert(2)&gt;]`,
      );
    }
    expect(result.html).toMatch(/M\[&lt;script&gt;alert\(1\)&lt;\/script&gt;&lt;img/);
    expect(result.html).toContain('href="#"');
    // Plain-text parts are not HTML: they carry the value as typed.
    expect(result.subject).toBe(`S ${SCRIPT}`);
  });
});
