import { Token, TokenKind } from 'liquidjs';
import { describe, expect, it } from 'vitest';
import { AppError } from '../../http/errors.ts';
import { compileTemplate, extractVariables, LIQUID_LIMITS, parseDesign, renderTemplate } from './index.ts';
import { buildDesign, buttonBlock, htmlBlock, textBlock } from './rendering.factories.ts';
import { parseLiquid } from './rendering.liquid.ts';

/** The INVALID_TEMPLATE error a promise or function ends with (anything else fails the test). */
async function templateError(fn: () => unknown): Promise<AppError> {
  try {
    await fn();
  } catch (error) {
    expect(error).toBeInstanceOf(AppError);
    expect((error as AppError).code).toBe('INVALID_TEMPLATE');
    return error as AppError;
  }
  throw new Error('expected INVALID_TEMPLATE, nothing was thrown');
}

function render(subject: string, texts: string[], variables: Record<string, unknown> = {}) {
  return renderTemplate(
    { subject, designJson: buildDesign(texts.map((text) => textBlock(text))) },
    variables,
  );
}

describe('extractVariables', () => {
  it('lists subject and design variables, sorted and unique, with dotted paths kept', () => {
    const design = parseDesign(
      buildDesign([
        textBlock('Hi {{ user.name | default: "there" }}, {{ first_name }}'),
        buttonBlock('{{ cta }}', 'https://x.example/{{ user.id }}'),
        htmlBlock('<b>{{ order.items[0].sku }}</b>{{ first_name }}'),
      ]),
    );
    expect(extractVariables('Order {{ order.number }} for {{ first_name }}', design)).toEqual([
      'cta',
      'first_name',
      'order.items[0].sku',
      'order.number',
      'user.id',
      'user.name',
    ]);
  });

  it('excludes loop locals, forloop and assigned or captured names, keeps what they read', () => {
    const design = parseDesign(
      buildDesign([
        textBlock('{% for item in items %}{{ item.title }} {{ forloop.index }}{% endfor %}'),
        textBlock(
          '{% assign total = order.total %}{{ total }}{% capture c %}{{ note }}{% endcapture %}{{ c }}',
        ),
        textBlock('{% if flag %}yes{% endif %}'),
      ]),
    );
    expect(extractVariables('', design)).toEqual(['flag', 'items', 'note', 'order.total']);
  });

  it('compileTemplate exposes the same list', () => {
    const designJson = buildDesign([textBlock('{{ b }} {{ a.c }}')]);
    expect(compileTemplate({ subject: '{{ a.c }}', designJson }).variables).toEqual(['a.c', 'b']);
  });

  it('rejects a Liquid syntax error with the path of the string', async () => {
    const design = parseDesign(buildDesign({ 'block-1': textBlock('ok'), 'block-2': textBlock('{% if %}') }));
    const error = await templateError(() => extractVariables('{{ fine }}', design));
    expect(error.details.reason).toBe('SYNTAX_ERROR');
    expect(error.details.issues).toEqual([{ path: 'block-2.data.props.text', message: expect.any(String) }]);
  });

  it('reports every broken string at once, the subject included', async () => {
    const designJson = buildDesign({ a: textBlock('{{ x | nosuchfilter }}'), b: textBlock('{% endfor %}') });
    const error = await templateError(() => compileTemplate({ subject: '{{ unclosed', designJson }));
    const paths = (error.details.issues as { path: string }[]).map((issue) => issue.path);
    expect(paths).toEqual(['subject', 'a.data.props.text', 'b.data.props.text']);
  });
});

describe('Liquid engine', () => {
  it('renders missing variables as empty strings', async () => {
    const email = await render('[{{ nobody.name }}]', ['a{{ missing }}b']);
    expect(email.subject).toBe('[]');
    expect(email.text).toBe('ab');
  });

  it('applies filters, if and for', async () => {
    const email = await render(
      '{{ name | upcase }}',
      ['{% for i in items %}{{ i }},{% endfor %}{% if vip %} VIP{% endif %}'],
      {
        name: 'ada',
        items: [1, 2, 3],
        vip: true,
      },
    );
    expect(email.subject).toBe('ADA');
    expect(email.text).toBe('1,2,3, VIP');
  });

  it('reads own properties only: no prototype access', async () => {
    const email = await render(
      'x',
      ['[{{ user.constructor }}|{{ constructor }}|{{ user.__proto__ }}|{{ s.toString }}]'],
      {
        user: { name: 'a' },
        s: 'str',
      },
    );
    expect(email.text).toBe('[|||]');
  });

  it('does not change the caller’s variables ({% increment %} writes to the variables scope)', async () => {
    const variables = { counter: 5 };
    await render('{% increment counter %}', ['{% increment counter %}'], variables);
    expect(variables).toEqual({ counter: 5 });
  });

  it.each(['{% include "secrets" %}', '{% render "/etc/passwd" %}', '{% layout "base" %}'])(
    'refuses file-system tags: %s',
    async (source) => {
      const error = await templateError(() => render(source, []));
      expect(error.details.reason).toBe('SYNTAX_ERROR');
    },
  );
});

describe('Liquid limits', () => {
  /** What the renderer reports for each limit of LIQUID_LIMITS (liquidjs's messages and ours). */
  const LIMIT = {
    memory: /^memory alloc limit exceeded/,
    clock: /^template render limit exceeded/,
    output: /^Liquid output exceeds 1000000 characters/,
  };
  /**
   * A hang guard, not a speed claim: each refusal is proven by the limit it reports; a renderer
   * that really ran these to the end would take minutes (10^8 and 10^9 iterations).
   */
  const HANG_GUARD_MS = 5_000;

  const hostile: Record<string, { source: string; limit: RegExp }> = {
    'a 10^8 range loop': { source: '{% for i in (1..100000000) %}{{ i }}{% endfor %}', limit: LIMIT.memory },
    // 1,000 iterations reach the output cap; on a loaded machine (or a cold first render) they
    // may take longer than the clock's 50 ms, which then stops it first. The output cap alone is
    // proven by the 10 MB variable below.
    'a 10 MB output from a loop': {
      source: `{% for i in (1..10000) %}${'x'.repeat(1000)}{% endfor %}`,
      limit: new RegExp(`${LIMIT.output.source}|${LIMIT.clock.source}`),
    },
    'a string doubled 30 times': {
      source:
        '{% assign s = "xxxxxxxxxx" %}{% for i in (1..30) %}{% assign s = s | append: s %}{% endfor %}{{ s }}',
      limit: LIMIT.memory,
    },
    // 10^6 inner ranges of 1,000 items: the clock (50 ms) or the budget (10^6 units), whichever
    // comes first on the machine, stops it.
    'nested loops of 10^9 iterations': {
      source:
        '{% for a in (1..1000) %}{% for b in (1..1000) %}{% for c in (1..1000) %}{% endfor %}{% endfor %}{% endfor %}',
      limit: new RegExp(`${LIMIT.clock.source}|${LIMIT.memory.source}`),
    },
  };

  it.each(Object.entries(hostile))('rejects %s by the limit it passes', async (_name, { source, limit }) => {
    const started = performance.now();
    const error = await templateError(() => render('hi', [source]));
    expect(error.details.reason).toBe('LIMIT_EXCEEDED');
    expect(error.details.issues).toEqual([
      { path: 'b1.data.props.text', message: expect.stringMatching(limit) },
    ]);
    expect(performance.now() - started).toBeLessThan(HANG_GUARD_MS);
  });

  /** A value whose lookup blocks the thread for `ms` without using CPU, like a descheduled process. */
  const stalling = (ms: number) => ({
    get value() {
      Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, ms);
      return 'v';
    },
  });

  it('counts CPU time, not wall time: a render stalled longer than renderMs is not refused', async () => {
    const stall = LIQUID_LIMITS.renderMs + 30;
    const email = await render('', ['{{ slow.value }}|{{ next }}'], { slow: stalling(stall), next: 'n' });
    expect(email.text).toBe('v|n');
  });

  it('still refuses a render stalled past the wall-time backstop (renderWallMs)', async () => {
    const error = await templateError(() =>
      render('', ['{{ slow.value }}|{{ next }}'], { slow: stalling(LIQUID_LIMITS.renderWallMs + 50) }),
    );
    expect(error.details.reason).toBe('LIMIT_EXCEEDED');
    expect((error.details.issues as { message: string }[])[0]?.message).toMatch(
      /^template render limit exceeded: .*wall/,
    );
  });

  it('refuses loops over a caller array that no memory or output budget stops, by CPU time', async () => {
    const xs = Array.from({ length: 1_000 }, (_, i) => i); // 10^9 iterations, nothing allocated
    const started = performance.now();
    const error = await templateError(() =>
      render(
        '',
        ['{% for a in xs %}{% for b in xs %}{% for c in xs %}{% endfor %}{% endfor %}{% endfor %}'],
        {
          xs,
        },
      ),
    );
    expect(error.details.reason).toBe('LIMIT_EXCEEDED');
    expect((error.details.issues as { message: string }[])[0]?.message).toMatch(
      /^template render limit exceeded: .*CPU/,
    );
    expect(performance.now() - started).toBeLessThan(HANG_GUARD_MS);
  });

  it('rejects a 10 MB variable value by the output cap (a sender can cause it too)', async () => {
    const started = performance.now();
    const error = await templateError(() => render('hi', ['{{ big }}'], { big: 'x'.repeat(10_000_000) }));
    expect(error.details.reason).toBe('LIMIT_EXCEEDED');
    expect(error.details.issues).toEqual([
      { path: 'b1.data.props.text', message: expect.stringMatching(LIMIT.output) },
    ]);
    expect(performance.now() - started).toBeLessThan(HANG_GUARD_MS);
  });

  it('shares one output budget across all strings of an email', async () => {
    const chunk = `{% for i in (1..100) %}${'y'.repeat(1000)}{% endfor %}`; // 100 000 characters each
    await expect(render('', Array(5).fill(chunk))).resolves.toBeDefined();
    const error = await templateError(() => render('', Array(11).fill(chunk)));
    expect(error.details.reason).toBe('LIMIT_EXCEEDED');
    expect((error.details.issues as { message: string }[])[0]?.message).toMatch(LIMIT.output);
  });

  it('rejects a template whose source is too long before parsing it', async () => {
    const error = await templateError(() =>
      compileTemplate({ subject: '', designJson: buildDesign([textBlock('{{ a }}'.repeat(200_000))]) }),
    );
    expect(error.details.reason).toBe('LIMIT_EXCEEDED');
  });

  it('keeps rendering after a rejected template (limits are per render, not per engine)', async () => {
    await templateError(() => render('', [hostile['a 10^8 range loop']!.source]));
    const email = await render('{% for i in (1..3) %}{{ i }}{% endfor %}', []);
    expect(email.subject).toBe('123');
  });
});

describe("liquidjs's token positions (replaced by a line table, session 16)", () => {
  /** liquidjs 10.30's own getPosition: a scan from the start of the input. */
  function scanned(input: string, begin: number): [number, number] {
    let [row, col] = [1, 1];
    for (let i = 0; i < begin; i++) {
      if (input[i] === '\n') {
        row++;
        col = 1;
      } else col++;
    }
    return [row, col];
  }

  it('gives the row and column the scan gives, for every offset, across inputs', () => {
    const inputs = [
      '',
      'one line',
      '\n',
      'a\nb\n\ncd\n',
      '\n\nx{{ y }}\n  {% if z %}\n{% endif %}\n',
      'é\n😀\r\nx',
    ];
    for (const input of inputs) {
      for (let begin = 0; begin <= input.length; begin++) {
        // Token is abstract in liquidjs's types, concrete at run time (every token kind extends it).
        const ConcreteToken = Token as unknown as new (...args: unknown[]) => Token;
        const token = new ConcreteToken(TokenKind.Output, input, begin, begin, undefined);
        expect(token.getPosition(), `${JSON.stringify(input)} @${begin}`).toEqual(scanned(input, begin));
      }
    }
  });

  it('keeps positions in parse errors', () => {
    const error = (() => {
      try {
        parseLiquid('body', 'a\nb\n  {% if %}', 'plain');
      } catch (thrown) {
        return thrown as AppError;
      }
      throw new Error('parsed');
    })();
    expect(JSON.stringify(error.details)).toMatch(/line:3, col:8/);
  });
});
