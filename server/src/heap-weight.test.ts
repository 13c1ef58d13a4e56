import { describe, expect, it } from 'vitest';
import { estimatedHeapBytes, jsonValueCount } from './heap-weight.ts';

describe('estimatedHeapBytes', () => {
  it('weighs many small objects far above their JSON text (the case a byte count of the text misses)', () => {
    const junk = { junk: Array.from({ length: 100_000 }, () => ({})) };
    const text = JSON.stringify(junk);
    expect(text.length).toBeLessThan(400_000);
    // 64 bytes per empty object and its slot: measured 42.7 MB for 700,000 of them on Node.js 24.
    expect(estimatedHeapBytes(junk)).toBeGreaterThan(6_000_000);
  });

  it('counts strings by length, numbers, nested arrays and dates', () => {
    expect(estimatedHeapBytes('abcd')).toBe(20);
    expect(estimatedHeapBytes([1, true, null])).toBe(32 + 24 + 16);
    expect(estimatedHeapBytes({ at: new Date(0), list: [[]] })).toBe(56 + 32 + 32 + 8 + 32 + 32);
  });

  it('walks a value nested deeper than the call stack allows', () => {
    let deep: unknown = {};
    for (let i = 0; i < 200_000; i++) deep = [deep];
    expect(estimatedHeapBytes(deep)).toBe(200_000 * 40 + 56);
  });
});

describe('jsonValueCount', () => {
  it('counts every value, and stops at limit + 1', () => {
    expect(jsonValueCount({ a: [1, 'x', null, { b: false }] }, 100)).toBe(7);
    expect(
      jsonValueCount(
        Array.from({ length: 1_000 }, () => 0),
        10,
      ),
    ).toBe(11);
  });
});
