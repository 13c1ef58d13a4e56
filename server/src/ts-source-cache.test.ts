import { execFile } from 'node:child_process';
import { mkdtempSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { afterAll, describe, expect, it } from 'vitest';
import { TS_SOURCE_CACHE_HOOK } from './start-environment.ts';

const scratch = mkdtempSync(path.join(tmpdir(), 'postwright-ts-source-cache-'));
afterAll(() => rmSync(scratch, { recursive: true, force: true }));

/** A fresh ESM package in the scratch directory with `files` (name → source); returns its path. */
function makePackage(files: Record<string, string>): string {
  const dir = mkdtempSync(path.join(scratch, 'package-'));
  writeFileSync(path.join(dir, 'package.json'), '{"type":"module"}');
  for (const [name, source] of Object.entries(files)) writeFileSync(path.join(dir, name), source);
  return dir;
}

/** The module's own output: a type, a comment outside Latin-1, and where its code runs (line:column). */
const MODULE = `import { helper } from './helper.ts';
// A comment — with a dash outside Latin-1.
const answer: number = helper(41);
export function where(): string {
  return new Error('here').stack!.split('\\n')[1]!.trim();
}
console.log(JSON.stringify({ answer, where: where() }));
`;

/**
 * Runs `node [--import <hook>] main.ts` in `dir` (the hook's cache in `cache`) and returns what the
 * module printed and whether the process loaded Node.js's TypeScript stripper (amaro).
 */
async function run(dir: string, options: { hook: boolean; cache?: string }) {
  const probe = path.join(dir, 'probe.mjs');
  writeFileSync(
    probe,
    `process.on('exit', () => console.log(JSON.stringify({ stripper: process.moduleLoadList.some((name) => name.includes('amaro')) })));`,
  );
  const { stdout } = await promisify(execFile)(
    process.execPath,
    [...(options.hook ? ['--import', TS_SOURCE_CACHE_HOOK] : []), '--import', probe, 'main.ts'],
    { cwd: dir, env: { PATH: process.env.PATH ?? '', POSTWRIGHT_TS_SOURCE_CACHE: options.cache ?? '' } },
  );
  const [printed, exit] = stdout.trim().split('\n');
  return { printed, stripper: (JSON.parse(exit!) as { stripper: boolean }).stripper };
}

/** The cache's entries (stripped modules) in `cache`. */
function cachedEntries(cache: string): string[] {
  return readdirSync(cache).filter((name) => name.endsWith('.js'));
}

describe('the TypeScript source cache (ts-source-cache.mjs)', () => {
  it("runs a module as Node.js's own stripping does, and strips it only once", async () => {
    const dir = makePackage({
      'main.ts': MODULE,
      'helper.ts': 'export const helper = (value: number): number => value + 1;\n',
    });
    const cache = path.join(dir, 'cache');
    const plain = await run(dir, { hook: false });
    expect(plain.printed).toContain('"answer":42');
    expect(plain.printed).toContain('main.ts:5:');

    const first = await run(dir, { hook: true, cache });
    expect(first).toEqual({ printed: plain.printed, stripper: true });
    expect(cachedEntries(cache)).toHaveLength(2);

    // Idle memory (issue #9): with every file cached, the stripper is never loaded.
    const second = await run(dir, { hook: true, cache });
    expect(second).toEqual({ printed: plain.printed, stripper: false });
  });

  it('strips an edited file again', async () => {
    const dir = makePackage({
      'main.ts': MODULE,
      'helper.ts': 'export const helper = (v: number) => v + 1;\n',
    });
    const cache = path.join(dir, 'cache');
    await run(dir, { hook: true, cache });
    const before = cachedEntries(cache);
    // An entry named as before module hashes were part of the name: nothing reads it any more.
    const unprefixed = `${'a'.repeat(64)}.js`;
    writeFileSync(path.join(cache, unprefixed), '');
    writeFileSync(path.join(dir, 'helper.ts'), 'export const helper = (v: number) => v * 2;\n');
    const edited = await run(dir, { hook: true, cache });
    expect(edited.printed).toContain('"answer":82');
    expect(edited.stripper).toBe(true);
    // One entry per module: the edited file's older entry and the unprefixed one are gone, the
    // unchanged module's entry stays (it was never pruned: one entry per version, forever).
    const after = cachedEntries(cache);
    expect(after).toHaveLength(2);
    expect(after).not.toContain(unprefixed);
    expect(after.filter((name) => before.includes(name))).toHaveLength(1);
  });

  it('still runs when its cache cannot be written', async () => {
    const dir = makePackage({
      'main.ts': MODULE,
      'helper.ts': 'export const helper = (v: number) => v + 1;\n',
    });
    // A file where the directory should be: neither mkdir nor writes succeed.
    const cache = path.join(dir, 'not-a-directory');
    writeFileSync(cache, '');
    const result = await run(dir, { hook: true, cache });
    expect(result.printed).toContain('"answer":42');
  });
});
