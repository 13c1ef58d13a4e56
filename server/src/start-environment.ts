/**
 * The environment `postwright start` runs in (issue #9, idle memory): two settings that only take
 * effect when they are in the environment before Node.js starts, so `start` re-executes itself
 * with them (same PID, same arguments) when they are missing.
 *
 * - `NODE_COMPILE_CACHE` (Node.js's on-disk compile cache, in {@link COMPILE_CACHE_DIR}): besides V8
 *   code, it keeps the JavaScript that Node.js's type stripping made of each `.ts` file. When every
 *   file is found there, the stripper (amaro, a WebAssembly module) is never loaded: measured
 *   ~12 MB less anonymous memory and ~5 MB fewer pages of the node binary in a process. It is
 *   filled by the first start after an install or a change (that process still strips, and idles
 *   that much higher until its next restart).
 * - `MALLOC_ARENA_MAX=2` (Linux, glibc): at most two malloc arenas instead of up to eight per core,
 *   so the memory that start-up's threads (compilers, GC, libuv) freed is not kept in arenas of
 *   their own; measured 4-7 MB less for node.
 *
 * The start script cannot set them itself: npm runs scripts with cmd.exe on Windows, where
 * `VAR=value command` is not valid. A value already set (also `NODE_DISABLE_COMPILE_CACHE`) is
 * left as it is.
 */
import { mkdirSync } from 'node:fs';
import path from 'node:path';

/** The compile cache of this installation: `node_modules/.cache/postwright/compile-cache`. */
export const COMPILE_CACHE_DIR = path.resolve(
  import.meta.dirname,
  '../../node_modules/.cache/postwright/compile-cache',
);

/**
 * The variables `postwright start` adds to `env` on `platform` (empty when nothing is missing):
 * NODE_COMPILE_CACHE unless it or NODE_DISABLE_COMPILE_CACHE is set; MALLOC_ARENA_MAX=2 on Linux
 * unless set.
 */
export function missingStartEnvironment(
  env: NodeJS.ProcessEnv,
  platform: NodeJS.Platform,
): Record<string, string> {
  const missing: Record<string, string> = {};
  if (env.NODE_COMPILE_CACHE === undefined && env.NODE_DISABLE_COMPILE_CACHE === undefined)
    missing.NODE_COMPILE_CACHE = COMPILE_CACHE_DIR;
  if (platform === 'linux' && env.MALLOC_ARENA_MAX === undefined) missing.MALLOC_ARENA_MAX = '2';
  return missing;
}

/**
 * Replaces this process with the same Node.js, flags and arguments plus the missing variables of
 * {@link missingStartEnvironment} (`process.execve`: same PID, so npm, a supervisor or a test still
 * holds the right process); the compile cache's directory is created first, and left out when it
 * cannot be (a read-only installation). Returns without doing anything when nothing is missing, or where
 * `process.execve` does not exist (Windows) or fails. Call it before anything is written to the
 * standard streams and before any other process or thread is started.
 */
export function reexecWithStartEnvironment(): void {
  if (typeof process.execve !== 'function') return;
  const missing = missingStartEnvironment(process.env, process.platform);
  if (missing.NODE_COMPILE_CACHE) {
    // Without a directory it can create, Node.js 24 can hang at start (e.g. a parent it gets
    // ENOENT for): made here, or left out when that fails (a read-only installation).
    try {
      mkdirSync(missing.NODE_COMPILE_CACHE, { recursive: true });
    } catch {
      delete missing.NODE_COMPILE_CACHE;
    }
  }
  if (Object.keys(missing).length === 0) return;
  try {
    process.execve(process.execPath, [process.execPath, ...process.execArgv, ...process.argv.slice(1)], {
      ...process.env,
      ...missing,
    });
  } catch {
    // Running without them only costs memory.
  }
}
