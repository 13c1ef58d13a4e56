import { describe, expect, it } from 'vitest';
import { jsonDepth } from './json-depth.ts';

describe('jsonDepth', () => {
  it.each([
    ['1', 0],
    ['{}', 1],
    ['{"a":[1,{"b":[]}]}', 4],
    ['{"a":"[[[[{{{{"}', 1],
    ['["\\"[[[", []]', 2],
    [`${'['.repeat(500)}${']'.repeat(500)}`, 500],
  ])('%s → %i', (text, depth) => {
    expect(jsonDepth(text)).toBe(depth);
  });
});
