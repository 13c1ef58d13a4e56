import { execFile } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { afterAll, describe, expect, it } from 'vitest';
import { COMPILE_CACHE_DIR, missingStartEnvironment } from './start-environment.ts';

const MAIN = path.join(import.meta.dirname, 'main.ts');
const scratch = mkdtempSync(path.join(tmpdir(), 'postwright-start-env-'));
afterAll(() => rmSync(scratch, { recursive: true, force: true }));

/**
 * Runs `node main.ts <args>` with `env` over a clean environment and a preloaded module that appends
 * one line per Node.js process image it runs in (PID, MALLOC_ARENA_MAX, NODE_COMPILE_CACHE): a
 * re-executed process writes two lines with the same PID. PORT=x makes `start` stop at its
 * configuration, after the point where it re-executes.
 */
async function linesOf(args: string[], env: Record<string, string>) {
  const record = path.join(scratch, `record-${Math.random().toString(36).slice(2)}.log`);
  const preload = path.join(scratch, 'record.mjs');
  writeFileSync(
    preload,
    `import { appendFileSync } from 'node:fs';
     appendFileSync(${JSON.stringify(record)}, JSON.stringify([process.pid, process.env.MALLOC_ARENA_MAX ?? null, process.env.NODE_COMPILE_CACHE ?? null]) + '\\n');`,
  );
  const result = await promisify(execFile)(process.execPath, [MAIN, ...args], {
    env: { PATH: process.env.PATH ?? '', NODE_OPTIONS: `--import ${preload}`, PORT: 'x', ...env },
  }).catch((error: { code: number; stdout: string; stderr: string }) => error);
  const lines = readFileSync(record, 'utf8')
    .trim()
    .split('\n')
    .map((line) => JSON.parse(line) as [number, string | null, string | null]);
  return { lines, stderr: result.stderr };
}

describe('missingStartEnvironment', () => {
  it('adds the compile cache everywhere and MALLOC_ARENA_MAX=2 on Linux', () => {
    expect(missingStartEnvironment({}, 'linux')).toEqual({
      NODE_COMPILE_CACHE: COMPILE_CACHE_DIR,
      MALLOC_ARENA_MAX: '2',
    });
    expect(missingStartEnvironment({}, 'darwin')).toEqual({ NODE_COMPILE_CACHE: COMPILE_CACHE_DIR });
    expect(
      COMPILE_CACHE_DIR.endsWith(path.join('node_modules', '.cache', 'postwright', 'compile-cache')),
    ).toBe(true);
  });

  it('leaves values already set (and a disabled compile cache) as they are', () => {
    expect(missingStartEnvironment({ NODE_COMPILE_CACHE: '/c', MALLOC_ARENA_MAX: '4' }, 'linux')).toEqual({});
    expect(missingStartEnvironment({ NODE_DISABLE_COMPILE_CACHE: '1' }, 'linux')).toEqual({
      MALLOC_ARENA_MAX: '2',
    });
  });
});

describe.runIf(process.platform === 'linux')('postwright start re-executes itself (Linux)', () => {
  it('with the missing variables, in the same process (PID), before reading its configuration', async () => {
    const { lines, stderr } = await linesOf(['start'], {});
    expect(lines).toHaveLength(2);
    const [before, after] = lines as [
      [number, string | null, string | null],
      [number, string | null, string | null],
    ];
    expect(before).toEqual([before[0], null, null]);
    expect(after).toEqual([before[0], '2', COMPILE_CACHE_DIR]);
    // The configuration error comes once, from the re-executed process.
    expect(stderr.match(/PORT/g)).toHaveLength(1);
  });

  it('not when the variables are set, nor for other commands', async () => {
    const set = await linesOf(['start'], {
      MALLOC_ARENA_MAX: '4',
      NODE_COMPILE_CACHE: path.join(scratch, 'cc'),
    });
    expect(set.lines).toHaveLength(1);
    expect(set.lines[0]?.slice(1)).toEqual(['4', path.join(scratch, 'cc')]);
    const migrate = await linesOf(['migrate'], {});
    expect(migrate.lines).toHaveLength(1);
  });
});
