/**
 * Child processes of the send benchmark: the real CLI (`node server/src/main.ts start`) started
 * with process.execPath, readiness polling, stopping, free ports, and the memory of a process tree
 * (PSS from /proc/<pid>/smaps_rollup, summed over the process and its descendants).
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { closeSync, openSync, readdirSync, readFileSync, readSync } from 'node:fs';
import { createServer } from 'node:net';
import path from 'node:path';

/** A started child: its handle, the tail of its output (for errors) and a stop function. */
export interface Child {
  process: ChildProcess;
  output: () => string;
  stop: () => Promise<void>;
}

/** A TCP port on 127.0.0.1 that was free a moment ago. */
export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const address = server.address();
      const port = typeof address === 'object' && address ? address.port : 0;
      server.close(() => resolve(port));
    });
  });
}

/**
 * Starts `node [...nodeArgs] <script> ...args` (same Node.js binary as this process) with `env`,
 * output kept in memory.
 */
export function startChild(
  script: string,
  args: string[],
  env: NodeJS.ProcessEnv,
  cwd: string,
  nodeArgs: string[] = [],
): Child {
  const child = spawn(process.execPath, [...nodeArgs, script, ...args], {
    cwd,
    env,
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let tail = '';
  const keep = (chunk: Buffer) => {
    tail = (tail + chunk.toString('utf8')).slice(-8_000);
  };
  child.stdout?.on('data', keep);
  child.stderr?.on('data', keep);
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  return {
    process: child,
    output: () => tail,
    async stop() {
      if (child.exitCode !== null || child.signalCode !== null) return;
      child.kill('SIGTERM');
      const timer = setTimeout(() => child.kill('SIGKILL'), 20_000);
      await exited;
      clearTimeout(timer);
    },
  };
}

/**
 * The environment of a Postwright child: this one's, minus database settings, plus LOG_LEVEL=warn,
 * NODE_ENV=production (BENCH_NODE_ENV overrides) and `env`.
 */
export function postwrightEnv(env: Record<string, string>): NodeJS.ProcessEnv {
  const base = { ...process.env };
  for (const name of ['DATABASE_URL', 'ENCRYPTION_KEY', 'DATA_DIR', 'PORT', 'REDIS_URL']) delete base[name];
  return {
    ...base,
    HOST: '127.0.0.1',
    LOG_LEVEL: 'warn',
    // React's production build renders about twice as fast as its development build.
    NODE_ENV: process.env.BENCH_NODE_ENV ?? 'production',
    // Another branch adds an outbound policy that refuses private/loopback SMTP hosts by default.
    SMTP_ALLOW_PRIVATE: 'true',
    ...env,
  };
}

/**
 * Starts `postwright start --role <role>` from the checkout at `root` as `npm start -- --role <role>`
 * runs it: with the start script's Node.js flags ({@link startScriptNodeFlags}), then `extraNodeArgs`
 * (e.g. `--cpu-prof`). Before session 22 the api and worker phases ran without the start script's
 * flags (`--max-semi-space-size`, `--v8-pool-size`), so they measured a process users do not run.
 * With BENCH_CPU_PROF_DIR set, the child also runs with `--cpu-prof` and writes its V8 CPU profile
 * (`*.cpuprofile`) there on exit.
 */
export function startPostwright(
  root: string,
  role: 'all' | 'api' | 'worker',
  env: NodeJS.ProcessEnv,
  extraNodeArgs: string[] = [],
): Child {
  const profileDir = process.env.BENCH_CPU_PROF_DIR;
  const nodeArgs = [
    ...startScriptNodeFlags(root),
    ...(profileDir ? ['--cpu-prof', `--cpu-prof-dir=${path.resolve(profileDir)}`] : []),
    ...extraNodeArgs,
  ];
  return startChild(path.join(root, 'server/src/main.ts'), ['start', '--role', role], env, root, nodeArgs);
}

/** Polls `check` every 100 ms until it is true; throws with the child's output after `timeoutMs`. */
export async function waitUntil(
  what: string,
  check: () => Promise<boolean> | boolean,
  child?: Child,
  timeoutMs = 90_000,
): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (
    !(await Promise.resolve()
      .then(check)
      .catch(() => false))
  ) {
    if (child && child.process.exitCode !== null) {
      throw new Error(`${what}: the process exited (${child.process.exitCode}).\n${child.output()}`);
    }
    if (Date.now() > deadline) throw new Error(`${what}: timed out.\n${child?.output() ?? ''}`);
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
}

/** Waits until `GET <baseUrl>/readyz` answers 200. */
export function waitReady(baseUrl: string, child: Child): Promise<void> {
  return waitUntil(`${baseUrl}/readyz`, async () => (await fetch(`${baseUrl}/readyz`)).status === 200, child);
}

function parentOf(pid: number): number | undefined {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    // Field 4 (ppid) follows the command name, which is in parentheses and may hold spaces.
    return Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]);
  } catch {
    return undefined;
  }
}

/** CPU time (user + system) a process has used, in seconds (0 once it is gone); Linux /proc. */
export function cpuSeconds(pid: number): number {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    // Fields 14 and 15 (utime, stime) in clock ticks; USER_HZ is 100 on Linux.
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    return (Number(fields[11]) + Number(fields[12])) / 100;
  } catch {
    return 0;
  }
}

/** Pids of the processes whose command name is `name` (e.g. `postgres`), from /proc. */
export function pidsNamed(name: string): number[] {
  return readdirSync('/proc')
    .map(Number)
    .filter((pid) => {
      if (!Number.isInteger(pid)) return false;
      try {
        return readFileSync(`/proc/${pid}/comm`, 'utf8').trim() === name;
      } catch {
        return false;
      }
    });
}

function kilobytes(pid: number, field: 'Pss' | 'Rss'): number {
  try {
    const rollup = readFileSync(`/proc/${pid}/smaps_rollup`, 'utf8');
    const match = new RegExp(`^${field}:\\s+(\\d+) kB`, 'm').exec(rollup);
    return match ? Number(match[1]) : 0;
  } catch {
    return 0;
  }
}

/** `root` and the pids of all its descendants (from /proc), root first, breadth first. */
export function processTree(root: number): number[] {
  const children = new Map<number, number[]>();
  for (const entry of readdirSync('/proc')) {
    const pid = Number(entry);
    if (!Number.isInteger(pid)) continue;
    const parent = parentOf(pid);
    if (parent !== undefined) children.set(parent, [...(children.get(parent) ?? []), pid]);
  }
  const tree: number[] = [];
  for (const queue = [root]; queue.length > 0; ) {
    const pid = queue.shift()!;
    tree.push(pid);
    queue.push(...(children.get(pid) ?? []));
  }
  return tree;
}

/** PSS of one process in bytes (0 once it is gone). */
export const pssBytes = (pid: number): number => kilobytes(pid, 'Pss') * 1024;

/** PSS and RSS (bytes) of `root` and all its descendants, and how many processes that is. */
export function treeMemory(root: number): { pss: number; rss: number; processes: number } {
  const tree = processTree(root);
  return {
    pss: tree.reduce((sum, pid) => sum + pssBytes(pid), 0),
    rss: tree.reduce((sum, pid) => sum + kilobytes(pid, 'Rss'), 0) * 1024,
    processes: tree.length,
  };
}

/** Bytes as megabytes (10^6 bytes), one decimal. */
export const megabytes = (bytes: number) => `${(bytes / 1e6).toFixed(1)} MB`;

/**
 * Physical memory held by the processes `pids` together, counting every resident page once
 * (bytes): the distinct page frames their mappings use, from /proc/<pid>/pagemap (needs root or
 * CAP_SYS_ADMIN; undefined otherwise). Unlike summed PSS, which divides each shared page among
 * ALL processes mapping it, this does not depend on what else runs: a page shared with an
 * unrelated process (another Node.js 24 — the benchmark's own — or another npm on the same Node
 * binary) counts in full, as it would on a machine where only this tree runs; a page shared
 * within the tree (PostgreSQL's shared buffers, the forked backends' text) counts once. This is
 * the tree's PSS when nothing else maps its pages. Swapped-out pages are not counted.
 */
export function treeResidentBytes(pids: readonly number[]): number | undefined {
  return residentBreakdown(pids)?.total;
}

/** Where a process's distinct resident pages are (see {@link residentBreakdown}). */
export interface ProcessResidentPages {
  pid: number;
  /** Bytes of pages no earlier process of the list has mapped. */
  bytes: number;
  /** Those bytes by mapping: a file's name (`node`, `libc.so.6`), `malloc heap`, `anonymous`, `shared memory`, `stack`. */
  byMapping: Record<string, number>;
}

/** The kind of memory a /proc/<pid>/smaps mapping is, from its path column. */
function mappingKind(name: string): string {
  if (name === '') return 'anonymous';
  if (name === '[heap]') return 'malloc heap';
  if (name.startsWith('[stack')) return 'stack';
  if (name.startsWith('/dev/zero') || name.startsWith('/SYSV') || name.startsWith('/dev/shm/'))
    return 'shared memory';
  if (name.startsWith('[')) return name;
  return path.basename(name.replace(/ \(deleted\)$/, ''));
}

/**
 * The tree's distinct resident pages (as {@link treeResidentBytes}, same total), each page
 * attributed to the first process of `pids` that maps it and to that mapping's kind: what the
 * idle-memory benchmark prints to show where the bytes are (issue #9). Anonymous mappings hold
 * V8's heap (256 KB pages), malloc's secondary arenas and thread stacks. Undefined without
 * /proc/<pid>/pagemap frame numbers (root or CAP_SYS_ADMIN).
 */
export function residentBreakdown(
  pids: readonly number[],
): { total: number; processes: ProcessResidentPages[] } | undefined {
  const PAGE = 4096;
  const frames = new Set<number>();
  const processes: ProcessResidentPages[] = [];
  let readable = false;
  for (const pid of pids) {
    let smaps: string;
    let fd: number;
    try {
      smaps = readFileSync(`/proc/${pid}/smaps`, 'utf8');
      fd = openSync(`/proc/${pid}/pagemap`, 'r');
    } catch {
      continue;
    }
    const own: ProcessResidentPages = { pid, bytes: 0, byMapping: {} };
    try {
      // Only mappings with resident pages: V8 and PostgreSQL reserve large address ranges.
      for (const [, start, end, name, rss] of smaps.matchAll(
        /^([0-9a-f]+)-([0-9a-f]+) \S+ \S+ \S+ \S+[ \t]*([^\n]*)\n(?:(?!Rss:)[^\n]*\n)*?Rss:\s+(\d+) kB/gm,
      )) {
        if (Number(rss) === 0) continue;
        const first = Number.parseInt(start!, 16) / PAGE;
        const pages = (Number.parseInt(end!, 16) - Number.parseInt(start!, 16)) / PAGE;
        const entries = Buffer.alloc(pages * 8);
        const read = readSync(fd, entries, 0, entries.length, first * 8);
        let added = 0;
        for (let offset = 0; offset + 8 <= read; offset += 8) {
          const entry = entries.readBigUInt64LE(offset);
          if (!(entry >> 63n)) continue; // not present
          const frame = Number(entry & 0x7fffffffffffffn);
          if (frame === 0) continue; // frame numbers hidden (no CAP_SYS_ADMIN)
          readable = true;
          if (frames.has(frame)) continue;
          frames.add(frame);
          added += PAGE;
        }
        if (added === 0) continue;
        const kind = mappingKind(name!.trim());
        own.byMapping[kind] = (own.byMapping[kind] ?? 0) + added;
        own.bytes += added;
      }
    } finally {
      closeSync(fd);
    }
    processes.push(own);
  }
  return readable ? { total: frames.size * PAGE, processes } : undefined;
}

/** The Node.js flags of the checkout's `npm start` script (e.g. `--max-semi-space-size=16`), so a phase runs what users run. */
export function startScriptNodeFlags(root: string): string[] {
  const scripts = (
    JSON.parse(readFileSync(path.join(root, 'package.json'), 'utf8')) as {
      scripts?: Record<string, string>;
    }
  ).scripts;
  return (scripts?.start ?? '').split(/\s+/).filter((word) => word.startsWith('--'));
}
