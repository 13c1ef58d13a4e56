import { describe, expect, it } from 'vitest';
import { checkVariablesLimits, variablesSchema } from './index.ts';

const jsonBytes = (value: unknown) => Buffer.byteLength(JSON.stringify(value));
const roomy = { maxBytes: 10_000_000, maxArrayLength: 1_000_000 };

describe('checkVariablesLimits', () => {
  // JSON values without escape sequences, so JSON.stringify's byte length is the exact measure.
  const samples: Record<string, Record<string, unknown>> = {
    empty: {},
    scalars: { s: 'text', n: -12.5e-7, i: 42, big: 1e21, t: true, f: false, z: null },
    nested: {
      user: { name: 'Ada', tags: ['a', 'b', ''], empty: {}, none: [] },
      list: [[1, [2]], { k: 'v' }],
    },
    unicode: { clé: 'déjà vu – 漢字 🙂', emoji: ['🙂🙃', 'ß'] },
  };

  it.each(Object.entries(samples))('counts the bytes of JSON.stringify exactly: %s', (_name, variables) => {
    const bytes = jsonBytes(variables);
    expect(checkVariablesLimits(variables, { ...roomy, maxBytes: bytes })).toBeNull();
    expect(checkVariablesLimits(variables, { ...roomy, maxBytes: bytes - 1 })).toMatchObject({
      limit: 'maxBytes',
      path: [],
    });
  });

  it('names the byte limit and its variable in the message', () => {
    const issue = checkVariablesLimits(
      { note: 'x'.repeat(300_000) },
      { maxBytes: 262_144, maxArrayLength: 10 },
    );
    expect(issue?.message).toBe('Variables must be at most 262144 bytes as JSON (SEND_VARIABLES_MAX_BYTES)');
  });

  it('refuses an array over the length limit wherever it is, with its path', () => {
    const limits = { maxBytes: 10_000_000, maxArrayLength: 3 };
    expect(checkVariablesLimits({ order: { items: [1, 2, 3] } }, limits)).toBeNull();
    const issue = checkVariablesLimits({ a: 1, order: { lines: [{ items: [1, 2, 3, 4] }] } }, limits);
    expect(issue).toEqual({
      limit: 'maxArrayLength',
      path: ['order', 'lines', 0, 'items'],
      message:
        'Arrays in variables must have at most 3 items, this one has 4 (SEND_VARIABLES_MAX_ARRAY_LENGTH)',
    });
  });

  it('refuses a 900,000-element array by its length, before looking at its elements', () => {
    let reads = 0;
    const items = new Proxy(new Array(900_000).fill(0), {
      get(target, key, receiver) {
        if (typeof key === 'string' && /^\d+$/.test(key)) reads++;
        return Reflect.get(target, key, receiver);
      },
    });
    const issue = checkVariablesLimits({ items }, { maxBytes: 262_144, maxArrayLength: 10_000 });
    expect(issue).toMatchObject({ limit: 'maxArrayLength', path: ['items'] });
    expect(reads).toBe(0);
  });

  it('stops at the first string over the byte limit without reading further entries', () => {
    let reads = 0;
    const variables = { big: 'x'.repeat(1_000_000) } as Record<string, unknown>;
    Object.defineProperty(variables, 'after', {
      enumerable: true,
      get() {
        reads++;
        return 'y';
      },
    });
    expect(checkVariablesLimits(variables, { maxBytes: 262_144, maxArrayLength: 10 })?.limit).toBe(
      'maxBytes',
    );
    expect(reads).toBe(0);
  });
});

describe('variablesSchema', () => {
  const schema = variablesSchema({ maxBytes: 1024, maxArrayLength: 2 });

  it('accepts an object within the limits and refuses one over, at the path of the array', () => {
    expect(schema.safeParse({ a: [1, 2], b: { c: 'd' } }).success).toBe(true);
    const refused = schema.safeParse({ a: { list: [1, 2, 3] } });
    expect(refused.success).toBe(false);
    expect(refused.error?.issues).toEqual([
      expect.objectContaining({ path: ['a', 'list'], message: expect.stringContaining('at most 2 items') }),
    ]);
    expect(schema.safeParse({ note: 'x'.repeat(1024) }).error?.issues[0]?.message).toContain('1024 bytes');
  });

  it('still refuses what is not an object', () => {
    expect(schema.safeParse(['a']).success).toBe(false);
    expect(schema.safeParse('a').success).toBe(false);
  });
});
