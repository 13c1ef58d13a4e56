import { describe, expect, it } from 'vitest';
import { compileTemplate } from './index.ts';
import { buildDesign, textBlock } from './rendering.factories.ts';

/** A compiled template whose design prints each of `outputs` (`{{ output }}`) in its own Text block. */
function templateReading(...outputs: string[]) {
  return compileTemplate({
    subject: '',
    designJson: buildDesign(outputs.map((output) => textBlock(`[{{ ${output} }}]`))),
  });
}

/** What the template renders for each output, in order (`[value]` per block). */
async function rendered(template: ReturnType<typeof templateReading>, values: Record<string, unknown>) {
  return (await template.render(values)).text.split('\n');
}

describe('missingVariables', () => {
  const template = templateReading('first_name', 'order.items[0].sku', 'user.name');

  it('reports a path whose top-level key or any later step is undefined, in the order of variables', () => {
    expect(template.variables).toEqual(['first_name', 'order.items[0].sku', 'user.name']);
    expect(template.missingVariables({})).toEqual(template.variables);
    expect(template.missingVariables({ first_name: '', user: { name: null } })).toEqual([
      'order.items[0].sku',
    ]);
    expect(template.missingVariables({ user: 'Ada', order: { items: [] } })).toEqual(template.variables);
    expect(template.missingVariables({ first_name: 'Ada', user: null, order: null })).toEqual([
      'order.items[0].sku',
      'user.name',
    ]);
    expect(
      template.missingVariables({ first_name: 0, user: { name: 'Ada' }, order: { items: [{ sku: 'A1' }] } }),
    ).toEqual([]);
  });

  it('reads own properties only, like the renderer', () => {
    const probe = templateReading('user.constructor', 'toString');
    expect(probe.missingVariables({ user: {} })).toEqual(['toString', 'user.constructor']);
  });

  it('agrees with what the renderer prints for size, first, last and indexes of lists and strings', async () => {
    const paths = [
      'items.size',
      'items.first.sku',
      'items.last.sku',
      'items[-1].sku',
      'word.size',
      'word.first',
    ];
    const probe = templateReading(...paths);
    const values = { items: [{ sku: 'A' }, { sku: 'B' }], word: 'abc' };
    // Liquid gives a string a size but no `first` (liquidjs reads `first` of arrays only).
    expect(await rendered(probe, values)).toEqual(['[2]', '[A]', '[B]', '[B]', '[3]', '[]']);
    expect(probe.missingVariables(values).sort()).toEqual(['word.first']);
    expect(probe.missingVariables({ items: [], word: 'abc' }).sort()).toEqual([
      'items.first.sku',
      'items.last.sku',
      'items[-1].sku',
      'word.first',
    ]);
  });

  it('keeps quoted keys whole', async () => {
    const probe = templateReading("a['b c'].d", "['o p']");
    expect(probe.variables.sort()).toEqual(["['o p']", "a['b c'].d"]);
    expect(probe.missingVariables({ a: { 'b c': { d: 1 } }, 'o p': 2 })).toEqual([]);
    expect(probe.missingVariables({ a: { b: { d: 1 } } }).sort()).toEqual(["['o p']", "a['b c'].d"]);
  });

  it('checks a computed index only up to the index', () => {
    const probe = templateReading('items[i].sku');
    expect(probe.variables).toContain('items[i].sku');
    expect(probe.missingVariables({ items: [] })).not.toContain('items[i].sku');
    expect(probe.missingVariables({})).toContain('items[i].sku');
  });
});
