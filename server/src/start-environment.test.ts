import { execFile } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { promisify } from 'node:util';
import { afterAll, describe, expect, it } from 'vitest';
import { importsTsSourceCache, missingStartEnvironment, TS_SOURCE_CACHE_HOOK } from './start-environment.ts';

const MAIN = path.join(import.meta.dirname, 'main.ts');
const scratch = mkdtempSync(path.join(tmpdir(), 'postwright-start-env-'));
afterAll(() => rmSync(scratch, { recursive: true, force: true }));

/** What the preload of {@link linesOf} records of one process image. */
interface Line {
  pid: number;
  mallocArenaMax: string | null;
  compileCache: string | null;
  /** The image's Node.js flags (process.execArgv). */
  execArgv: string[];
  /**
   * Whether the image had loaded Node.js's TypeScript stripper (amaro) when it exited; undefined
   * for an image that did not exit but was replaced (re-executed).
   */
  stripper?: boolean;
}

/**
 * Runs `node main.ts <args>` with `env` over a clean environment and a preloaded module that appends
 * one line per Node.js process image it runs in (PID, MALLOC_ARENA_MAX, NODE_COMPILE_CACHE, its
 * flags, and for the image that exits whether it loaded amaro): a re-executed process writes two
 * lines with the same PID. PORT=x makes `start` stop at its
 * configuration, after the point where it re-executes.
 */
async function linesOf(args: string[], env: Record<string, string>, nodeArgs: string[] = []) {
  const record = path.join(scratch, `record-${Math.random().toString(36).slice(2)}.log`);
  const preload = path.join(scratch, 'record.mjs');
  writeFileSync(
    preload,
    `import { appendFileSync } from 'node:fs';
     const line = {
       pid: process.pid,
       mallocArenaMax: process.env.MALLOC_ARENA_MAX ?? null,
       compileCache: process.env.NODE_COMPILE_CACHE ?? null,
       execArgv: process.execArgv,
     };
     appendFileSync(${JSON.stringify(record)}, JSON.stringify(line) + '\\n');
     process.on('exit', () => {
       const stripper = process.moduleLoadList.some((name) => name.includes('amaro'));
       appendFileSync(${JSON.stringify(record)}, JSON.stringify({ stripper }) + '\\n');
     });`,
  );
  const result = await promisify(execFile)(process.execPath, [...nodeArgs, MAIN, ...args], {
    env: { PATH: process.env.PATH ?? '', NODE_OPTIONS: `--import ${preload}`, PORT: 'x', ...env },
  }).catch((error: { code: number; stdout: string; stderr: string }) => error);
  const lines: Line[] = [];
  for (const text of readFileSync(record, 'utf8').trim().split('\n')) {
    const line = JSON.parse(text) as Line | { stripper: boolean };
    if ('pid' in line) lines.push(line);
    else lines.at(-1)!.stripper = line.stripper;
  }
  return { lines, stderr: result.stderr };
}

describe('missingStartEnvironment', () => {
  it("adds MALLOC_ARENA_MAX=2 on Linux only, and not Node.js's compile cache", () => {
    expect(missingStartEnvironment({}, 'linux')).toEqual({ MALLOC_ARENA_MAX: '2' });
    expect(missingStartEnvironment({}, 'darwin')).toEqual({});
  });

  it('leaves a value already set as it is', () => {
    expect(missingStartEnvironment({ MALLOC_ARENA_MAX: '4' }, 'linux')).toEqual({});
  });
});

describe('importsTsSourceCache', () => {
  it("recognises the start script's flag and the re-execution's, in either form", () => {
    const root = path.resolve(import.meta.dirname, '../..');
    expect(importsTsSourceCache(['--import', './server/src/ts-source-cache.mjs'], root)).toBe(true);
    expect(importsTsSourceCache(['--import=./server/src/ts-source-cache.mjs'], root)).toBe(true);
    expect(importsTsSourceCache([`--import=${pathToFileURL(TS_SOURCE_CACHE_HOOK).href}`], '/')).toBe(true);
    expect(importsTsSourceCache([`--import=${TS_SOURCE_CACHE_HOOK}`], '/')).toBe(true);
    expect(importsTsSourceCache(['--import', './server/src/ts-source-cache.mjs'], '/elsewhere')).toBe(false);
    expect(importsTsSourceCache(['--max-semi-space-size=16', TS_SOURCE_CACHE_HOOK], root)).toBe(false);
    expect(importsTsSourceCache([], root)).toBe(false);
  });
});

describe.runIf(process.platform === 'linux')('postwright start re-executes itself (Linux)', () => {
  it('with the missing settings, in the same process (PID), before reading its configuration', async () => {
    await linesOf(['start'], {}); // fills the source cache where an edit left it stale
    const { lines, stderr } = await linesOf(['start'], {});
    expect(lines).toHaveLength(2);
    const [before, after] = lines as [Line, Line];
    expect(before).toMatchObject({ mallocArenaMax: null });
    expect(importsTsSourceCache(before.execArgv, process.cwd())).toBe(false);
    expect(after).toMatchObject({ pid: before.pid, mallocArenaMax: '2', compileCache: null });
    expect(importsTsSourceCache(after.execArgv, process.cwd())).toBe(true);
    // Every .ts file came from the cache (idle memory, issue #9).
    expect(after.stripper).toBe(false);
    // The configuration error comes once, from the re-executed process.
    expect(stderr.match(/PORT/g)).toHaveLength(1);
  });

  it('not when the settings are there, nor for other commands', async () => {
    const set = await linesOf(['start'], { MALLOC_ARENA_MAX: '4' }, ['--import', TS_SOURCE_CACHE_HOOK]);
    expect(set.lines).toHaveLength(1);
    expect(set.lines[0]).toMatchObject({ mallocArenaMax: '4', stripper: false });
    const migrate = await linesOf(['migrate'], {});
    expect(migrate.lines).toHaveLength(1);
  });
});
