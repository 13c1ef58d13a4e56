import { describe, expect, it } from 'vitest';
import { AppError } from '../../http/errors.ts';
import { LIQUID_LIMITS, renderTemplate } from './index.ts';
import { buildDesign, htmlBlock, textBlock } from './rendering.factories.ts';
import { ARGUMENT_CHARACTER_UNITS, DATE_CONVERSION_UNITS, PREDICATE_UNITS } from './rendering.filters.ts';

/** Renders `source` as the subject (plain mode) and returns it, or the INVALID_TEMPLATE error. */
async function renderSubject(source: string, variables: Record<string, unknown>): Promise<string | AppError> {
  try {
    return (await renderTemplate({ subject: source, designJson: buildDesign([textBlock('x')]) }, variables))
      .subject;
  } catch (error) {
    expect(error).toBeInstanceOf(AppError);
    expect((error as AppError).code).toBe('INVALID_TEMPLATE');
    return error as AppError;
  }
}

/** Asserts `result` is the refusal by liquidjs's memory budget (not the clock, not the output cap). */
function expectMemoryRefusal(result: string | AppError): void {
  expect(result).toBeInstanceOf(AppError);
  const { details } = result as AppError;
  expect(details.reason).toBe('LIMIT_EXCEEDED');
  expect(details.issues).toEqual([
    { path: 'subject', message: expect.stringMatching(/memory alloc limit exceeded/) },
  ]);
}

/**
 * 400,000 elements: liquidjs 10.30.1 alone charges at most one unit per element, which fits the
 * 1,000,000-unit budget, so each refusal below comes from the per-element charges of rendering.filters.ts.
 */
const N = 400_000;

/** `N` objects whose `k` counts its reads: a filter refused before it starts reads none. */
function countedObjects(n: number) {
  const counter = { reads: 0 };
  const items = Array.from({ length: n }, (_, i) => ({
    get k() {
      counter.reads++;
      return i % 10;
    },
  }));
  return { counter, items };
}

describe('array filters are charged per element against the memory budget', () => {
  it('refuses a 900,000-element array through sort_natural by the memory limit (issue #8)', async () => {
    const names = Array.from({ length: 900_000 }, (_, i) => `Name${(i * 7919) % 900_000}`);
    const started = performance.now();
    const result = await renderSubject('{{ names | sort_natural | size }}', { names });
    expectMemoryRefusal(result);
    // Secondary, wide margin: the unrefused sort took 2.8 s (issue #8); the refusal takes ~0.
    expect(performance.now() - started).toBeLessThan(2_000);
  });

  const counted = countedObjects(N);

  it.each([
    ['sort', '{{ items | sort: "k" | size }}'],
    ['sort_natural', '{{ items | sort_natural: "k" | size }}'],
    ['map', '{{ items | map: "k" | size }}'],
    ['sum', '{{ items | sum: "k" }}'],
    ['where', '{{ items | where: "k", 3 | size }}'],
    ['reject', '{{ items | reject: "k", 3 | size }}'],
    ['where_exp', '{{ items | where_exp: "i", "i.k == 3" | size }}'],
    ['reject_exp', '{{ items | reject_exp: "i", "i.k == 3" | size }}'],
    ['group_by', '{{ items | group_by: "k" | size }}'],
    ['group_by_exp', '{{ items | group_by_exp: "i", "i.k" | size }}'],
    ['find', '{{ items | find: "k", 11 }}'],
    ['find_exp', '{{ items | find_exp: "i", "i.k == 11" }}'],
    ['find_index', '{{ items | find_index: "k", 11 }}'],
    ['find_index_exp', '{{ items | find_index_exp: "i", "i.k == 11" }}'],
    ['has', '{{ items | has: "k", 11 }}'],
    ['has_exp', '{{ items | has_exp: "i", "i.k == 11" }}'],
  ])(`refuses %s over ${N} elements before reading one`, async (_name, source) => {
    counted.counter.reads = 0;
    expectMemoryRefusal(await renderSubject(source, { items: counted.items }));
    expect(counted.counter.reads).toBe(0);
  });

  it.each([
    ['sort', '{{ words | sort | join: "," }}', 'B,a,c'],
    ['sort_natural', '{{ words | sort_natural | join: "," }}', 'a,B,c'],
    ['sort by a key', '{{ items | sort: "k" | map: "n" | join: "," }}', 'y,z,x'],
    ['map', '{{ items | map: "n" | join: "," }}', 'x,y,z'],
    ['sum', '{{ items | sum: "k" }}', '6'],
    ['where', '{{ items | where: "k", 1 | map: "n" | join }}', 'y'],
    ['where_exp', '{{ items | where_exp: "i", "i.k > 1" | map: "n" | join: "," }}', 'x,z'],
    ['group_by', '{{ items | group_by: "g" | map: "name" | join: "," }}', 'a,b'],
    ['find', '{{ items | find: "k", 2 | map: "n" }}', 'z'],
    ['has_exp', '{{ items | has_exp: "i", "i.k == 3" }}', 'true'],
    ['sample', '{{ words | sample: 3 | size }}', '3'],
    [
      'uniq, reverse, concat, compact',
      '{{ words | concat: words | uniq | reverse | compact | join }}',
      'a B c',
    ],
  ])('%s still works on ordinary arrays', async (_name, source, expected) => {
    const items = [
      { n: 'x', k: 3, g: 'a' },
      { n: 'y', k: 1, g: 'b' },
      { n: 'z', k: 2, g: 'a' },
    ];
    expect(await renderSubject(source, { items, words: ['c', 'B', 'a'] })).toBe(expected);
  });

  it('fits a sort_natural and a where over the largest array a caller may send (10,000 items)', async () => {
    const items = Array.from({ length: 10_000 }, (_, i) => ({ k: i % 10, name: `n${i}` }));
    // One output, so the only limit that can refuse it is the memory budget (the clock is
    // checked between nodes): 10,000 × (14 comparisons × 2 + 3 + 1) + 10,000 × (25 + 1) units.
    const result = await renderSubject('{{ items | sort_natural: "name" | where: "k", 3 | size }}', {
      items,
    });
    expect(result).toBe('1000');
  });

  it(`refuses a where once its elements times ${PREDICATE_UNITS} pass the budget, and not before`, async () => {
    // + liquidjs's own unit, + ARGUMENT_CHARACTER_UNITS for the one character of "k"; the rest of
    // the subject (its output, `size`) costs a few units more, hence the 100 spared.
    const perElement = PREDICATE_UNITS + 1 + ARGUMENT_CHARACTER_UNITS;
    const fits = Math.floor((LIQUID_LIMITS.memory - 100) / perElement);
    const source = '{{ items | where: "k", 0 | size }}';
    expect(await renderSubject(source, { items: Array(fits).fill({ k: 0 }) })).toBe(String(fits));
    const over = Math.floor(LIQUID_LIMITS.memory / perElement) + 1;
    expectMemoryRefusal(await renderSubject(source, { items: Array(over).fill({ k: 0 }) }));
  });

  it('charges a property path or an expression per element by its length, and a date format per conversion, before they run', async () => {
    // Review finding, session 15: each ran for seconds as one node, the clock unchecked, while
    // they were charged as if their argument were one character: `map` with a path of 30,000 dots
    // over 10,000 elements 10 s, a long `where_exp` 12 s, 30,000 `%a` in a date format 2.3 s.
    const zeros = Array(10_000).fill(0);
    const longPath = '.'.repeat(30_000);
    const expression = Array.from({ length: 4_000 }, (_, i) => `x == ${i}`).join(' or ');
    const started = performance.now();
    expectMemoryRefusal(await renderSubject('{{ items | map: p | size }}', { items: zeros, p: longPath }));
    expectMemoryRefusal(await renderSubject('{{ items | sum: p }}', { items: zeros, p: longPath }));
    expectMemoryRefusal(await renderSubject('{{ items | sort: p | size }}', { items: zeros, p: longPath }));
    expectMemoryRefusal(
      await renderSubject('{{ items | where_exp: "x", e | size }}', {
        items: zeros.slice(0, 2_000),
        e: expression,
      }),
    );
    expectMemoryRefusal(
      await renderSubject('{{ items | where: p, 1 | size }}', { items: zeros.slice(0, 2_000), p: longPath }),
    );
    const conversions = Math.floor(LIQUID_LIMITS.memory / DATE_CONVERSION_UNITS) + 1;
    expectMemoryRefusal(await renderSubject('{{ "2026-01-01" | date: f }}', { f: '%a'.repeat(conversions) }));
    expect(performance.now() - started).toBeLessThan(1_000);
    // What templates write stays well inside the budget.
    const orders = Array.from({ length: 1_000 }, (_, i) => ({ customer: { name: `c${i}` }, total: i }));
    expect(
      await renderSubject(
        '{{ orders | map: "customer.name" | size }} {{ orders | where_exp: "o", "o.total > 499 and o.customer.name != blank" | size }} {{ orders | sum: "total" }} {{ "2026-01-02" | date: "%a %d %b %Y" }}',
        { orders },
      ),
    ).toBe('1000 500 499500 Fri 02 Jan 2026');
  });

  it('charges url_decode, url_encode, cgi_escape, uri_escape and slugify per input character', async () => {
    // Review finding, session 16: liquidjs charged them nothing; a chain of 5,000 url_decode over a
    // 250 KB variable blocked a send for 2.9 s.
    const big = 'a%20'.repeat(62_500); // 250,000 characters
    const chain = (filter: string, times: number) => `{{ s${` | ${filter}`.repeat(times)} | size }}`;
    for (const filter of ['url_decode', 'url_encode', 'cgi_escape', 'uri_escape', 'slugify']) {
      expectMemoryRefusal(await renderSubject(chain(filter, 10), { s: big }));
    }
    // Ordinary use fits.
    expect(await renderSubject('{{ "Hello World" | slugify }} {{ "a b" | url_encode }}', {})).toBe(
      'hello-world a+b',
    );
  });

  it('charges filters in Html blocks (html mode) too', async () => {
    const designJson = buildDesign({ h: htmlBlock('{{ items | where: "k", 3 | size }}') });
    await expect(
      renderTemplate({ subject: 's', designJson }, { items: counted.items }),
    ).rejects.toMatchObject({
      details: { reason: 'LIMIT_EXCEEDED', issues: [{ path: 'h.data.props.contents' }] },
    });
  });
});

describe('printing values', () => {
  it('prints arrays, numbers, booleans and nil as Liquid does', async () => {
    const values = { list: [1, [2, [3]], null, 'a'], n: 3.5, yes: true, none: null };
    expect(await renderSubject('[{{ list }}|{{ n }}|{{ yes }}|{{ none }}|{{ missing }}]', values)).toBe(
      '[123a|3.5|true||]',
    );
    const designJson = buildDesign([
      htmlBlock('<i>{{ list }}</i>'),
      textBlock('{{ list }} *{{ star }}*', { markdown: true }),
    ]);
    const email = await renderTemplate({ subject: 's', designJson }, { list: ['<b>', 1], star: '*[x](y)' });
    expect(email.html).toContain('<i>&lt;b&gt;1</i>');
    expect(email.html).toContain('&lt;b&gt;1');
    expect(email.html).not.toContain('<b>');
    expect(email.html).not.toMatch(/<a /);
  });
});
