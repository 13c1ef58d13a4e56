/**
 * The environment `postwright start` runs in (issue #9, idle memory): settings that only take
 * effect when they are given before Node.js starts, so `start` re-executes itself with them (same
 * PID, same arguments) when they are missing.
 *
 * - `--import` of {@link TS_SOURCE_CACHE_HOOK} (the start script passes it already): the JavaScript
 *   that type stripping made of each `.ts` file comes from an on-disk cache, so the stripper (amaro,
 *   a WebAssembly module) is never loaded once every file is found there: measured ~12 MB less
 *   anonymous memory and ~5 MB fewer pages of the node binary in a process. The first start after
 *   an install or a change fills the cache (that process still strips, and idles that much higher
 *   until its next restart). It replaces Node.js's compile cache (`NODE_COMPILE_CACHE`), which
 *   did the same but kept every entry it read in memory for the process's life (~6 MB of malloc
 *   heap); see ts-source-cache.mjs.
 * - `MALLOC_ARENA_MAX=2` (Linux, glibc): at most two malloc arenas instead of up to eight per core,
 *   so the memory that start-up's threads (compilers, GC, libuv) freed is not kept in arenas of
 *   their own; measured 4-7 MB less for node.
 *
 * The start script cannot set the variable itself: npm runs scripts with cmd.exe on Windows, where
 * `VAR=value command` is not valid. A value already set is left as it is.
 */
import path from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';

/** The load hook that serves type-stripped sources from their cache (`ts-source-cache.mjs`). */
export const TS_SOURCE_CACHE_HOOK = path.join(import.meta.dirname, 'ts-source-cache.mjs');

/**
 * The variables `postwright start` adds to `env` on `platform` (empty when nothing is missing):
 * MALLOC_ARENA_MAX=2 on Linux unless set.
 */
export function missingStartEnvironment(
  env: NodeJS.ProcessEnv,
  platform: NodeJS.Platform,
): Record<string, string> {
  const missing: Record<string, string> = {};
  if (platform === 'linux' && env.MALLOC_ARENA_MAX === undefined) missing.MALLOC_ARENA_MAX = '2';
  return missing;
}

/**
 * Whether Node.js flags `execArgv` (of a process started in `cwd`) import {@link TS_SOURCE_CACHE_HOOK}:
 * `--import=<path or file: URL>` or `--import <path or file: URL>`, a relative path resolved
 * against `cwd`.
 */
export function importsTsSourceCache(execArgv: readonly string[], cwd: string): boolean {
  return execArgv.some((arg, index) => {
    const specifier = arg.startsWith('--import=')
      ? arg.slice('--import='.length)
      : index > 0 && execArgv[index - 1] === '--import'
        ? arg
        : undefined;
    if (specifier === undefined) return false;
    const file = specifier.startsWith('file:') ? fileURLToPath(specifier) : path.resolve(cwd, specifier);
    return file === TS_SOURCE_CACHE_HOOK;
  });
}

/**
 * Replaces this process with the same Node.js, flags and arguments plus what is missing: the
 * variables of {@link missingStartEnvironment} and the `--import` of {@link TS_SOURCE_CACHE_HOOK}
 * (`process.execve`: same PID, so npm, a supervisor or a test still holds the right process).
 * Returns without doing anything when nothing is missing, or where `process.execve` does not exist
 * (Windows) or fails. Call it before anything is written to the standard streams and before any
 * other process or thread is started.
 */
export function reexecWithStartEnvironment(): void {
  if (typeof process.execve !== 'function') return;
  const missing = missingStartEnvironment(process.env, process.platform);
  const flags = importsTsSourceCache(process.execArgv, process.cwd())
    ? []
    : [`--import=${pathToFileURL(TS_SOURCE_CACHE_HOOK).href}`];
  if (Object.keys(missing).length === 0 && flags.length === 0) return;
  try {
    process.execve(
      process.execPath,
      [process.execPath, ...flags, ...process.execArgv, ...process.argv.slice(1)],
      { ...process.env, ...missing },
    );
  } catch {
    // Running without them only costs memory.
  }
}
