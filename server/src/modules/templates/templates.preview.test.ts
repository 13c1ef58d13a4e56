import { describe, expect, it } from 'vitest';
import { findMissingVariables, parseVariablePath } from './templates.preview.service.ts';

describe('parseVariablePath', () => {
  it('splits the paths extractVariables reports', () => {
    expect(parseVariablePath('user.name')).toEqual([{ key: 'user' }, { key: 'name' }]);
    expect(parseVariablePath('order.items[0].sku')).toEqual([
      { key: 'order' },
      { key: 'items' },
      { index: 0 },
      { key: 'sku' },
    ]);
    expect(parseVariablePath("a['b c'].d")).toEqual([{ key: 'a' }, { key: 'b c' }, { key: 'd' }]);
    expect(parseVariablePath("['o p']")).toEqual([{ key: 'o p' }]);
    expect(parseVariablePath('c[-1]')).toEqual([{ key: 'c' }, { index: -1 }]);
    expect(parseVariablePath('f[g.h].i')).toEqual([{ key: 'f' }, { dynamic: true }, { key: 'i' }]);
    expect(parseVariablePath('l.m-n')).toEqual([{ key: 'l' }, { key: 'm-n' }]);
  });
});

describe('findMissingVariables', () => {
  const used = ['first_name', 'order.items[0].sku', 'user.name'];

  it('reports a path whose top-level key or any later step is undefined', () => {
    expect(findMissingVariables(used, {})).toEqual(used);
    expect(findMissingVariables(used, { first_name: '', user: { name: null } })).toEqual([
      'order.items[0].sku',
    ]);
    expect(findMissingVariables(used, { user: 'Ada', order: { items: [] } })).toEqual([
      'first_name',
      'order.items[0].sku',
      'user.name',
    ]);
    expect(
      findMissingVariables(used, { first_name: 0, user: { name: 'Ada' }, order: { items: [{ sku: 'A1' }] } }),
    ).toEqual([]);
  });

  it('reads own properties only, like the renderer', () => {
    expect(findMissingVariables(['user.constructor', 'toString'], { user: {} })).toEqual([
      'user.constructor',
      'toString',
    ]);
  });

  it('knows size, first, last and negative indexes of lists and strings', () => {
    const paths = ['items.size', 'items.first.sku', 'items.last', 'items[-1].sku', 'word.size'];
    expect(findMissingVariables(paths, { items: [{ sku: 'A' }, { sku: 'B' }], word: 'abc' })).toEqual([]);
    expect(findMissingVariables(paths, { items: [], word: 'abc' })).toEqual([
      'items.first.sku',
      'items.last',
      'items[-1].sku',
    ]);
  });

  it('checks a computed index only up to the index', () => {
    expect(findMissingVariables(['items[i].sku'], { items: [] })).toEqual([]);
    expect(findMissingVariables(['items[i].sku'], {})).toEqual(['items[i].sku']);
  });
});
