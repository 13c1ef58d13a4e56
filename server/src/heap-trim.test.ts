import v8 from 'node:v8';
import { describe, expect, it } from 'vitest';
import { trimHeap } from './heap-trim.ts';

const youngGeneration = () =>
  v8.getHeapSpaceStatistics().find((space) => space.space_name === 'new_space')!.space_size;

describe('trimHeap', () => {
  it('shrinks a young generation that start-up-like allocation grew', () => {
    // Objects that survive a few scavenges make V8 grow the young generation (as start-up does).
    const kept: unknown[] = [];
    for (let round = 0; round < 200_000; round++) {
      kept.push({ round, text: `item ${round}` });
      if (kept.length > 50_000) kept.splice(0, 25_000);
    }
    const grown = youngGeneration();
    expect(grown).toBeGreaterThan(4 * 1024 * 1024);
    trimHeap();
    expect(youngGeneration()).toBeLessThan(grown / 2);
    expect(kept.length).toBeGreaterThan(0);
  });
});
