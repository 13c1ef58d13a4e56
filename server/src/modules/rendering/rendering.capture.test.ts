import { describe, expect, it } from 'vitest';
import { AppError } from '../../http/errors.ts';
import { compileTemplate, LIQUID_LIMITS } from './index.ts';
import { buildDesign, textBlock } from './rendering.factories.ts';
import { type LiquidMode, parseLiquid, renderLiquid } from './rendering.liquid.ts';

/** One string rendered as Liquid in `mode`, the way every string of an email is. */
function liquid(source: string, variables: Record<string, unknown> = {}, mode: LiquidMode = 'plain'): string {
  return renderLiquid([parseLiquid('b1.data.props.text', source, mode)], variables)[0]!;
}

/** The INVALID_TEMPLATE error `fn` ends with (anything else fails the test). */
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

/** Asserts a LIMIT_EXCEEDED error refused by the memory budget. */
function expectMemoryLimit(error: AppError): void {
  expect(error.details.reason).toBe('LIMIT_EXCEEDED');
  expect(error.details.issues).toEqual([
    { path: expect.any(String), message: expect.stringMatching(/^memory alloc limit exceeded/) },
  ]);
}

/** 15 characters doubled 25 times: 503,316,480 characters if nothing stops it. */
const DOUBLING =
  '{% capture s %}xxxxxxxxxxxxxxx{% endcapture %}{% for i in (1..25) %}{% capture s %}{{ s }}{{ s }}{% endcapture %}{% endfor %}{{ s.size }}';

describe('{% capture %} under the memory budget', () => {
  it.each(['plain', 'html', 'markdown'] as const)(
    'refuses a captured string doubled 25 times (%s strings)',
    async (mode) => {
      expectMemoryLimit(await templateError(() => liquid(DOUBLING, {}, mode)));
    },
  );

  it('refuses it in a whole email render, as a save renders it (with no variables)', async () => {
    const compiled = compileTemplate({ subject: 'Hi', designJson: buildDesign([textBlock(DOUBLING)]) });
    expectMemoryLimit(await templateError(() => compiled.render({})));
  });

  it('refuses it when the variables make it hostile, and renders the same template otherwise', async () => {
    const source =
      '{% capture s %}{{ seed }}{% endcapture %}{% for i in (1..count) %}{% capture s %}{{ s }}{{ s }}{% endcapture %}{% endfor %}{{ s.size }}';
    expect(liquid(source, { seed: 'xxxxxxxxxxxxxxx', count: 3 })).toBe('120');
    expectMemoryLimit(await templateError(() => liquid(source, { seed: 'xxxxxxxxxxxxxxx', count: 25 })));
  });

  it('never holds a captured string longer than the memory budget', async () => {
    const capture = '{% capture s %}{{ big }}{% endcapture %}{{ s.size }}';
    // A little room for the other charges of the render (printing the size charges its digits).
    const fits = 'x'.repeat(LIQUID_LIMITS.memory - 100);
    expect(liquid(capture, { big: fits })).toBe(String(fits.length));
    expectMemoryLimit(
      await templateError(() => liquid(capture, { big: 'x'.repeat(LIQUID_LIMITS.memory + 1) })),
    );
  });

  it('shares the budget with the rest of the render (filters, other captures)', async () => {
    const half = 'x'.repeat(LIQUID_LIMITS.memory / 2 + 1);
    const capture = '{% capture a %}{{ half }}{% endcapture %}';
    expect(liquid(`${capture}{{ a.size }}`, { half })).toBe(String(half.length));
    expectMemoryLimit(await templateError(() => liquid(`${capture}${capture}`, { half })));
    expectMemoryLimit(
      await templateError(() => liquid(`{% assign b = half | append: "" %}${capture}`, { half })),
    );
  });
});

describe('{% capture %} as before', () => {
  it('captures text, outputs and tags into a variable printed later, printing nothing itself', () => {
    expect(
      liquid(
        'a{% capture greeting %}Hello {{ name | upcase }}{% if vip %}!{% endif %}{% endcapture %}b[{{ greeting }}]',
        {
          name: 'ada',
          vip: true,
        },
      ),
    ).toBe('ab[Hello ADA!]');
  });

  it('accepts a quoted name', () => {
    expect(liquid('{% capture "x" %}b{% endcapture %}[{{ x }}]')).toBe('[b]');
  });

  it('keeps whitespace control', () => {
    expect(liquid('{%- capture x -%}  padded  {%- endcapture -%}  [{{ x }}]')).toBe('[padded]');
    expect(liquid('{% capture x %} a {% endcapture %} [{{ x }}]')).toBe(' [ a ]');
  });

  it('captures inside for, reading and growing its own value', () => {
    expect(
      liquid(
        '{% capture s %}{% endcapture %}{% for i in (1..4) %}{% capture s %}{{ s }}{{ i }},{% endcapture %}{% endfor %}{{ s }}',
      ),
    ).toBe('1,2,3,4,');
  });

  it('prints values as Liquid prints them', () => {
    const source =
      '{% capture x %}{{ n }}|{{ list }}|{{ nothing }}|{{ flag }}|{{ obj.a }}{% endcapture %}{{ x }}';
    expect(liquid(source, { n: 4.5, list: [1, 2], flag: false, obj: { a: null } })).toBe('4.5|12||false|');
  });

  it('escapes outputs in html strings as liquidjs does (the captured text is escaped again when printed)', () => {
    expect(liquid('{% capture x %}<b>{{ v }}</b>{% endcapture %}{{ x }}', { v: '<i>' }, 'html')).toBe(
      '&lt;b&gt;&amp;lt;i&amp;gt;&lt;/b&gt;',
    );
  });

  it('keeps captured names out of the variables a template reads', () => {
    const { variables } = compileTemplate({
      subject: '',
      designJson: buildDesign([textBlock('{% capture c %}{{ note }}{% endcapture %}{{ c }}')]),
    });
    expect(variables).toEqual(['note']);
  });
});
