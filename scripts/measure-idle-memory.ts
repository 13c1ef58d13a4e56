/**
 * Idle memory of `npm start` on the embedded default (issue #9: ≤ 150 MB for the process tree).
 *
 * Runs exactly what a user runs — `npm start` in this checkout — with a fresh temp DATA_DIR,
 * PORT=0 and no DATABASE_URL, waits for "listening", lets it idle IDLE_SECONDS (default 10), then
 * prints the PSS (from /proc/<pid>/smaps_rollup) of every process in the tree under npm, the
 * total, the total without npm (node + PostgreSQL), and the tree's distinct resident pages (the
 * target's measure). npm is started with `npm run`'s node_modules/.bin entries taken off PATH, so
 * it runs on the Node.js of the user's PATH as from a shell. Stops it with SIGTERM and removes the
 * DATA_DIR. Then the floor under the target: `scripts/idle-floor.mjs` alone (a `node:http` server,
 * and Fastify + pg + pg-boss with no Postwright code, on a scratch database of BENCH_DATABASE_URL),
 * its distinct pages added to the run's npm and PostgreSQL. Linux only (/proc).
 * Usage: `npm run bench:idle-memory`.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { chmodSync, mkdtempSync, readFileSync, readlinkSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import pg from 'pg';
import { megabytes, processTree, pssBytes, residentBreakdown } from './bench-send/processes.ts';

const root = path.resolve(import.meta.dirname, '..');
const idleSeconds = Number(process.env.IDLE_SECONDS ?? 10);
const START_TIMEOUT_MS = 120_000;
const STOP_TIMEOUT_MS = 30_000;

/** The command name of `pid` (its /proc comm), or `?` once it is gone. */
function commandOf(pid: number): string {
  try {
    return readFileSync(`/proc/${pid}/comm`, 'utf8').trim();
  } catch {
    return '?';
  }
}

/** The executable `pid` runs (/proc/<pid>/exe), or `?`. */
function executableOf(pid: number): string {
  try {
    return readlinkSync(`/proc/${pid}/exe`);
  } catch {
    return '?';
  }
}

/** What a PostgreSQL process does (its process title, e.g. "checkpointer"), or '' for others. */
function roleOf(pid: number): string {
  try {
    const title = readFileSync(`/proc/${pid}/cmdline`, 'utf8').replaceAll('\0', ' ').trim();
    return title.startsWith('postgres: ') ? title.slice('postgres: '.length, 60) : '';
  } catch {
    return '';
  }
}

/** Resolves when `child` printed "listening"; rejects with its output when it exits or times out. */
function listening(child: ChildProcess, output: () => string): Promise<void> {
  return new Promise((resolve, reject) => {
    const timer = setTimeout(
      () => reject(new Error(`no "listening" within 120 s.\n${output()}`)),
      START_TIMEOUT_MS,
    );
    const check = () => {
      if (/listening/i.test(output())) {
        clearTimeout(timer);
        resolve();
      }
    };
    child.stdout?.on('data', check);
    child.stderr?.on('data', check);
    child.once('exit', (code) => {
      clearTimeout(timer);
      reject(new Error(`npm start exited (${code}) before listening.\n${output()}`));
    });
  });
}

/**
 * Starts `command args` (its last 8 KB of output kept for errors); `idle` resolves once it printed
 * "listening" and then idled IDLE_SECONDS, and rejects with its output when it exits or does not
 * listen within 120 s. The caller stops `child` either way.
 */
function startIdling(
  command: string,
  args: string[],
  options: { cwd: string; env?: NodeJS.ProcessEnv },
): { child: ChildProcess; idle: Promise<void> } {
  const child = spawn(command, args, { ...options, stdio: ['ignore', 'pipe', 'pipe'] });
  let tail = '';
  const keep = (chunk: Buffer) => {
    tail = (tail + chunk.toString('utf8')).slice(-8_000);
  };
  child.stdout?.on('data', keep);
  child.stderr?.on('data', keep);
  const idle = listening(child, () => tail).then(
    () => new Promise<void>((resolve) => setTimeout(resolve, idleSeconds * 1000)),
  );
  return { child, idle };
}

/** Sends SIGTERM to npm and waits for the whole tree to be gone (SIGKILL after 30 s). */
async function stopTree(child: ChildProcess): Promise<void> {
  const pids = processTree(child.pid!);
  for (const pid of pids) {
    try {
      process.kill(pid, 'SIGTERM');
    } catch {
      // Already gone.
    }
  }
  const deadline = Date.now() + STOP_TIMEOUT_MS;
  const alive = () => pids.filter((pid) => commandOf(pid) !== '?');
  while (alive().length > 0 && Date.now() < deadline)
    await new Promise((resolve) => setTimeout(resolve, 200));
  for (const pid of alive()) process.kill(pid, 'SIGKILL');
}

/** Distinct pages (bytes) of the tree's npm and of its PostgreSQL processes, from the run. */
interface TreeParts {
  npm: number;
  postgres: number;
}

async function measureTree(): Promise<TreeParts | undefined> {
  const dataDir = mkdtempSync(path.join(tmpdir(), 'postwright-idle-'));
  // Run as root, Postwright runs its PostgreSQL as "postgres", which must traverse DATA_DIR.
  chmodSync(dataDir, 0o711);
  const env: NodeJS.ProcessEnv = {
    ...process.env,
    DATA_DIR: dataDir,
    PORT: '0',
    HOST: '127.0.0.1',
    BASE_URL: 'http://127.0.0.1:3000',
  };
  for (const name of ['DATABASE_URL', 'REDIS_URL', 'npm_config_loglevel']) delete env[name];
  // As from the user's shell: `npm run` puts node_modules/.bin (this checkout's Node.js 24) first on
  // PATH, so the npm started here would run on the same node binary as Postwright and share its
  // pages, which a user's `npm start` (npm on the Node.js of their PATH) does not.
  env.PATH = (env.PATH ?? '')
    .split(path.delimiter)
    .filter((dir) => !/node_modules[\\/]\.bin$|node-gyp-bin$/.test(dir))
    .join(path.delimiter);
  const npm = process.platform === 'win32' ? 'npm.cmd' : 'npm';
  const { child, idle } = startIdling(npm, ['start'], { cwd: root, env });
  try {
    await idle;
    const rows = processTree(child.pid!)
      .map((pid) => ({ pid, command: commandOf(pid), role: roleOf(pid), pss: pssBytes(pid) }))
      // A short-lived child (a PostgreSQL backend that just ended) is gone by the time it is read.
      .filter((row) => row.command !== '?');
    const total = rows.reduce((sum, row) => sum + row.pss, 0);
    const npmPss = rows.filter((row) => row.pid === child.pid).reduce((sum, row) => sum + row.pss, 0);
    console.log(`Idle memory of \`npm start\` (embedded PostgreSQL) after ${idleSeconds} s idle, PSS:`);
    for (const row of rows)
      console.log(
        `  ${String(row.pid).padStart(7)}  ${row.command.padEnd(16)} ${megabytes(row.pss).padStart(9)}  ${row.role}`,
      );
    console.log(`  total                     ${megabytes(total)} (${rows.length} processes)`);
    console.log(`  without npm               ${megabytes(total - npmPss)}`);
    const postgres = rows.filter((row) => row.command === 'postgres').reduce((sum, row) => sum + row.pss, 0);
    console.log(`  of which PostgreSQL       ${megabytes(postgres)}`);
    console.log(`  npm runs on               ${executableOf(child.pid!)}`);
    // PSS splits each shared page among every process mapping it, this benchmark's own Node.js 24
    // and npm's Node.js included: the tree's sum is lower here than on a machine running only it.
    // The target is judged on the tree's own pages, each counted once (treeResidentBytes).
    const breakdown = residentBreakdown(rows.map((row) => row.pid));
    if (breakdown === undefined) {
      console.log('  alone (distinct pages)    unknown: /proc/<pid>/pagemap needs root');
      console.log(`  target ≤ 150 MB total: PSS ${total <= 150e6 ? 'met' : 'NOT met'} (not checked alone)`);
      return undefined;
    }
    const alone = breakdown.total;
    console.log(
      `  alone (distinct pages)    ${megabytes(alone)} (the PSS of this tree with nothing else running)`,
    );
    console.log(`  target ≤ 150 MB total: ${alone <= 150e6 ? 'met' : 'NOT met'}`);
    // Where those pages are: each page counted at the first process that maps it (npm, then node,
    // then PostgreSQL's postmaster before its children), by mapping (≥ 0.5 MB shown).
    console.log('Distinct pages by process and mapping:');
    for (const own of breakdown.processes) {
      const row = rows.find((candidate) => candidate.pid === own.pid);
      const mappings = Object.entries(own.byMapping)
        .filter(([, bytes]) => bytes >= 0.5e6)
        .sort((a, b) => b[1] - a[1])
        .map(([name, bytes]) => `${name} ${megabytes(bytes)}`)
        .join(', ');
      console.log(
        `  ${String(own.pid).padStart(7)}  ${(row?.role || row?.command || '?').slice(0, 24).padEnd(24)} ${megabytes(own.bytes).padStart(9)}  ${mappings}`,
      );
    }
    const bytesOf = (pids: number[]) =>
      breakdown.processes.filter((own) => pids.includes(own.pid)).reduce((sum, own) => sum + own.bytes, 0);
    return {
      npm: bytesOf([child.pid!]),
      postgres: bytesOf(rows.filter((row) => row.command === 'postgres').map((row) => row.pid)),
    };
  } finally {
    await stopTree(child);
    rmSync(dataDir, { recursive: true, force: true });
  }
}

/**
 * Starts `scripts/idle-floor.mjs <args>` with this checkout's Node.js 24 and `npm start`'s V8
 * flags, lets it idle as long as the tree did, and returns its distinct resident pages (bytes; a
 * lone process's RSS), or undefined when it did not start or /proc/<pid>/pagemap is unreadable.
 */
async function floorProcess(args: string[]): Promise<number | undefined> {
  const { child, idle } = startIdling(
    process.execPath,
    ['--max-semi-space-size=16', '--v8-pool-size=1', path.join(root, 'scripts', 'idle-floor.mjs'), ...args],
    { cwd: root },
  );
  try {
    await idle;
    return residentBreakdown([child.pid!])?.total;
  } catch (error) {
    console.log(`  (${args[0]} did not start: ${(error as Error).message.split('\n')[0]})`);
    return undefined;
  } finally {
    child.kill('SIGKILL');
    await new Promise((resolve) => (child.exitCode === null ? child.once('exit', resolve) : resolve(null)));
  }
}

/**
 * The floor under the target: a `node:http` server, and the Fastify + pg + pg-boss stack with no
 * Postwright code (on a scratch database of BENCH_DATABASE_URL, default this machine's PostgreSQL),
 * each alone on this checkout's Node.js 24; added to the tree's npm and PostgreSQL, what any
 * server on this stack would measure before its own code.
 */
async function measureFloor(parts: TreeParts): Promise<void> {
  const adminUrl = process.env.BENCH_DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/postgres';
  const name = `postwright_idle_floor_${process.pid}`;
  const admin = new pg.Client({ connectionString: adminUrl });
  console.log(`Floor: the same Node.js ${process.version} and flags, ${idleSeconds} s idle, distinct pages:`);
  const httpOnly = await floorProcess(['http']);
  if (httpOnly !== undefined) console.log(`  node:http server listening              ${megabytes(httpOnly)}`);
  let stack: number | undefined;
  try {
    await admin.connect();
  } catch (error) {
    console.log(
      `  Fastify + pg + pg-boss: skipped, no PostgreSQL at BENCH_DATABASE_URL (${(error as Error).message})`,
    );
    return;
  }
  try {
    await admin.query(`create database ${name}`);
    const url = new URL(adminUrl);
    url.pathname = `/${name}`;
    stack = await floorProcess(['stack', url.toString()]);
  } finally {
    await admin.query(`drop database if exists ${name} with (force)`).catch(() => {});
    await admin.end();
  }
  if (stack === undefined) return;
  console.log(`  Fastify + pg + pg-boss (one queue)      ${megabytes(stack)}  (no Postwright code)`);
  const floor = parts.npm + stack + parts.postgres;
  console.log(
    `  + this run's npm ${megabytes(parts.npm)} and PostgreSQL ${megabytes(parts.postgres)} = ${megabytes(floor)}: ` +
      `${floor <= 150e6 ? 'under' : 'over'} 150 MB before any Postwright code`,
  );
}

const parts = await measureTree();
if (parts) await measureFloor(parts);
