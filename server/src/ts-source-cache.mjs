/**
 * A cache of the JavaScript that Node.js's type stripping makes of each TypeScript module, for
 * `postwright start` (issue #9, idle memory). Loaded with `--import` (start-environment.ts adds it
 * when `start` re-executes itself), so it is in place before `main.ts` is read: it is JavaScript
 * because a `.ts` file would itself need the stripper.
 *
 * Why not Node.js's compile cache (`NODE_COMPILE_CACHE`), which also keeps stripped sources: that
 * cache holds every entry it read from disk in memory for the life of the process (its V8 code
 * cache and the stripped source of every module, ~6 MB of malloc heap for an idle server, measured
 * with heaptrack). Here a module's stripped source is read, handed to Node.js and dropped, and
 * the stripper (amaro, a WebAssembly module: ~12 MB of memory and ~5 MB of the node binary's
 * pages) is loaded only when a file is not in the cache.
 *
 * For each module Node.js would strip (format `module-typescript`: `.ts`/`.mts` outside
 * node_modules), the load hook returns the cached JavaScript as format `module`; the output is the
 * same as Node.js's own (`module.stripTypeScriptTypes` with the module's URL as `sourceUrl`, which
 * appends the same `//# sourceURL` comment), so line and column numbers stay those of the `.ts`
 * file. An entry is named `<module>-<content>.js`: a hash of the module's URL, then the SHA-256 of
 * the Node.js version and the TypeScript source, so an edited file or another Node.js is stripped
 * again. When a module is stripped and stored, its older entries (same module, other content: the
 * file before an upgrade or an edit) are deleted, so the cache holds about one entry per module
 * instead of growing with every upgrade (noticed in session 21: it was never pruned). A cache that
 * cannot be written is skipped (each start then strips).
 */

import { hash } from 'node:crypto';
import { mkdirSync, readdirSync, readFileSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { registerHooks, stripTypeScriptTypes } from 'node:module';
import path from 'node:path';

/** Where the stripped sources are kept: `node_modules/.cache/postwright/ts-source`. */
const TS_SOURCE_CACHE_DIR = path.resolve(
  import.meta.dirname,
  '../../node_modules/.cache/postwright/ts-source',
);

/**
 * The JavaScript of the TypeScript module at `url` (its source `typescript`), from the cache in
 * `directory` or stripped now and stored there.
 * @param {string} url the module's `file:` URL (it ends the output's `//# sourceURL` comment)
 * @param {string} typescript the module's source
 * @param {string} directory the cache directory (created when missing)
 * @returns {string} what Node.js's type stripping makes of it
 * @throws the stripper's own errors (ERR_UNSUPPORTED_TYPESCRIPT_SYNTAX, ERR_INVALID_TYPESCRIPT_SYNTAX)
 */
function strippedSource(url, typescript, directory) {
  const module = hash('sha256', url).slice(0, 32);
  const key = `${module}-${hash('sha256', `${process.version}\0${url}\0${typescript}`)}`;
  const file = path.join(directory, `${key}.js`);
  try {
    return readFileSync(file, 'utf8');
  } catch {
    // Not cached yet: strip below.
  }
  // The public API warns that it is experimental once per process; Node.js's loader, doing the same
  // for the same modules without this cache, does not.
  const emitWarning = process.emitWarning;
  /** @type {(warning: string | Error, ...rest: unknown[]) => void} */
  const quiet = (warning, ...rest) => {
    if (!String(warning).includes('stripTypeScriptTypes'))
      Reflect.apply(emitWarning, process, [warning, ...rest]);
  };
  process.emitWarning = /** @type {typeof process.emitWarning} */ (quiet);
  let javascript;
  try {
    javascript = stripTypeScriptTypes(typescript, { mode: 'strip', sourceUrl: url });
  } finally {
    process.emitWarning = emitWarning;
  }
  try {
    mkdirSync(directory, { recursive: true });
    // Written whole then renamed: a process starting meanwhile never reads half a file.
    const partial = `${file}.${process.pid}.tmp`;
    writeFileSync(partial, javascript);
    renameSync(partial, file);
    pruneOlderEntries(directory, module, `${key}.js`);
  } catch {
    // A read-only installation: strip again next time.
  }
  return javascript;
}

/**
 * The cache directory's file names, read once per process on its first miss (see pruneOlderEntries).
 * @type {string[] | undefined}
 */
let entries;

/**
 * Deletes the entries of module `module` (the URL hash that starts their names) other than `keep`,
 * and entries named before module hashes were part of the name (64 hex digits and `.js`, which no
 * later start reads). Run after a miss only: a start with every module cached never lists the
 * directory. A process starting meanwhile that still reads an older entry keeps its open file.
 * @param {string} directory the cache directory
 * @param {string} module the module's URL hash
 * @param {string} keep the entry just written
 */
function pruneOlderEntries(directory, module, keep) {
  /** @param {string} name */
  const stale = (name) => name !== keep && (name.startsWith(`${module}-`) || UNPREFIXED_ENTRY.test(name));
  entries ??= readdirSync(directory);
  for (const name of entries) if (stale(name)) rmSync(path.join(directory, name), { force: true });
  entries = entries.filter((name) => !stale(name));
}

/** An entry's name before module hashes were part of it. */
const UNPREFIXED_ENTRY = /^[0-9a-f]{64}\.js$/;

// The load hook (synchronous, in this thread): TypeScript modules from the cache, others as before.
// POSTWRIGHT_TS_SOURCE_CACHE names another directory (the tests' scratch cache).
const directory = process.env.POSTWRIGHT_TS_SOURCE_CACHE || TS_SOURCE_CACHE_DIR;
registerHooks({
  load(url, context, nextLoad) {
    const loaded = nextLoad(url, context);
    if (loaded.format !== 'module-typescript' || loaded.source == null) return loaded;
    const typescript =
      typeof loaded.source === 'string' ? loaded.source : Buffer.from(loaded.source).toString('utf8');
    return { format: 'module', source: strippedSource(url, typescript, directory), shortCircuit: true };
  },
});
