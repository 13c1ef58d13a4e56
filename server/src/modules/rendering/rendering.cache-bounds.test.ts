import { describe, expect, it } from 'vitest';
import {
  COMPILED_TEMPLATE_CACHE_MAX_BYTES,
  compiledTemplateCacheBytes,
  compileTemplateCached,
} from './rendering.compile.ts';
import { parseDesign } from './rendering.design.ts';

/*
 * Review finding, session 13: the compiled templates were kept by count (200), each with its
 * design, and a design of 2 MB of JSON (unknown keys are kept for the builder) parses into about
 * 40 MB: a team could fill a process's heap by sending through 100 versions of one. The cache is
 * now bounded in estimated bytes too.
 */
describe('the compiled template cache is bounded in bytes', () => {
  it('pushes out the least recently used compiled templates past COMPILED_TEMPLATE_CACHE_MAX_BYTES', async () => {
    // 90,000 values (the save's bound is 100,000): about 5.8 MB estimated, 23 MB as a compiled template.
    const design = parseDesign({
      root: { type: 'EmailLayout', data: { childrenIds: ['b1'] } },
      b1: {
        type: 'Text',
        data: {
          style: {},
          props: { text: 'Hi {{ name }}', junk: Array.from({ length: 90_000 }, () => ({})) },
        },
      },
    });
    const compile = (key: string) =>
      compileTemplateCached({ subject: 'S', designJson: design, cacheKey: key });
    const first = compile('heavy-0');
    expect(compile('heavy-0')).toBe(first);
    expect((await first.render({ name: 'Ann' })).html).toContain('Hi Ann');
    for (let i = 1; i < 4; i++) compile(`heavy-${i}`);
    expect(compiledTemplateCacheBytes()).toBeLessThanOrEqual(COMPILED_TEMPLATE_CACHE_MAX_BYTES);
    // By count alone (200) all four were kept.
    expect(compile('heavy-0')).not.toBe(first);
    const last = compile('heavy-3');
    expect(compile('heavy-3')).toBe(last);
  });
});
