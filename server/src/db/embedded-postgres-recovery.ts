import { execFile } from 'node:child_process';
import { readdir, readFile, readlink, rm } from 'node:fs/promises';
import path from 'node:path';
import { promisify } from 'node:util';
import { type EmbeddedLayout, EmbeddedPostgresError } from './embedded-postgres-cluster.ts';

const run = promisify(execFile);

/** What the OS says about a running process: its parent, its command line, its state letter. */
interface ProcessInfo {
  ppid: number;
  command: string;
  state: string;
}

/**
 * Makes the cluster startable after a crash of the Postwright process that ran it. The server runs
 * in its own session (so a terminal's Ctrl-C reaches Postwright first, which stops it last), which
 * also means a `kill -9` of Postwright leaves it running, orphaned. From `pgdata/postmaster.pid`:
 * - no file, or its PID is gone: nothing to do (PostgreSQL replaces a stale lock file itself and
 *   recovers from its WAL);
 * - its PID is a zombie (the server was killed and nobody reaps it, as under a container's PID 1
 *   that reaps nothing): PostgreSQL would take the zombie for a live server and refuse to start, so
 *   once none of the old server's processes is left the lock file is removed;
 * - its PID is our server and its parent is still the Postwright process named in `postgres.owner`
 *   (or, that file missing, a running Node.js process): the database is in use, throws;
 * - its PID is our server and that parent is gone: the orphan is stopped (fast shutdown, then
 *   immediate after 30 s), so the new start runs on a cleanly shut down cluster;
 * - its PID now belongs to something else (PID reuse): the stale lock file is removed;
 * - its PID is another PostgreSQL on this directory (not started by Postwright): throws.
 */
export async function recoverStaleServer(layout: EmbeddedLayout, log: (line: string) => void): Promise<void> {
  const lockFile = path.join(layout.pgdata, 'postmaster.pid');
  const lock = await readFile(lockFile, 'utf8').catch(() => undefined);
  const pid = Number.parseInt(lock?.split('\n')[0] ?? '', 10);
  if (!Number.isInteger(pid) || pid <= 0) return;
  const info = await processInfo(pid);
  if (!info) return;
  if (info.state === 'Z') {
    await removeZombieLock(layout, lockFile, pid, log);
    return;
  }
  if (!/(^|\/)postgres(\s|$)/.test(info.command)) {
    log(`Removing ${lockFile}: its PID ${pid} now belongs to another program.`);
    await rm(lockFile, { force: true });
    return;
  }
  if (!info.command.includes(layout.pgdata)) {
    throw new EmbeddedPostgresError(
      `A PostgreSQL server (PID ${pid}) not started by Postwright runs on ${layout.pgdata}: stop it first.`,
    );
  }
  const owner = Number.parseInt(await readFile(layout.ownerFile, 'utf8').catch(() => ''), 10);
  // The owner file names the Postwright that runs the server; without it (another start removed
  // it), a parent still running Node.js is taken as that Postwright too: stopping its server under
  // it was the worse mistake (review finding, session 15).
  const parent = owner === info.ppid ? undefined : await processInfo(info.ppid);
  if (
    owner === info.ppid ||
    (info.ppid > 1 && parent && parent.state !== 'Z' && /(^|\/)node(\s|$)/.test(parent.command))
  ) {
    throw new EmbeddedPostgresError(
      `The embedded database in ${layout.pgdata} is in use by Postwright process ${info.ppid}: only one process can use DATA_DIR (set DATABASE_URL to run several).`,
    );
  }
  log(
    `Stopping the PostgreSQL server (PID ${pid}) left running by a Postwright process that ended without stopping it.`,
  );
  if (await stopProcess(pid, 'SIGINT', 30_000)) return;
  if (await stopProcess(pid, 'SIGQUIT', 10_000)) return;
  throw new EmbeddedPostgresError(
    `The orphaned PostgreSQL server (PID ${pid}) on ${layout.pgdata} does not stop: kill it and start again.`,
  );
}

/**
 * Removes the lock file of a killed server whose PID lingers as a zombie, after waiting (up to
 * 15 s) for its backends to exit: each notices the postmaster's death, and while one still runs
 * (working directory = pgdata) the shared memory is in use and the lock must stay.
 * @throws EmbeddedPostgresError when a process of the old server is still running then.
 */
async function removeZombieLock(
  layout: EmbeddedLayout,
  lockFile: string,
  pid: number,
  log: (line: string) => void,
): Promise<void> {
  const deadline = Date.now() + 15_000;
  while ((await processesIn(layout.pgdata)).length > 0) {
    if (Date.now() > deadline) {
      throw new EmbeddedPostgresError(
        `Processes of a killed PostgreSQL server still run on ${layout.pgdata}: stop them and start again.`,
      );
    }
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
  log(`Removing ${lockFile}: its server (PID ${pid}) was killed and is gone.`);
  await rm(lockFile, { force: true });
  // The Unix socket's lock file (in pgdata, the socket directory) names the same dead PID.
  for (const name of await readdir(layout.pgdata)) {
    if (!/^\.s\.PGSQL\.\d+\.lock$/.test(name)) continue;
    const socketLock = path.join(layout.pgdata, name);
    const owner = (await readFile(socketLock, 'utf8').catch(() => '')).split('\n')[0];
    if (owner === String(pid)) await rm(socketLock, { force: true });
  }
}

/** Live (non-zombie) processes whose working directory is `dir` (Linux /proc; none elsewhere). */
async function processesIn(dir: string): Promise<number[]> {
  if (process.platform !== 'linux') return [];
  const found: number[] = [];
  for (const entry of await readdir('/proc')) {
    const pid = Number(entry);
    if (!Number.isInteger(pid) || pid <= 0) continue;
    const cwd = await readlink(`/proc/${pid}/cwd`).catch(() => undefined);
    if (cwd !== dir) continue;
    const info = await processInfo(pid);
    if (info && info.state !== 'Z') found.push(pid);
  }
  return found;
}

/** Sends `signal` and polls until the process is gone; true when it went within `timeoutMs`. */
async function stopProcess(pid: number, signal: NodeJS.Signals, timeoutMs: number): Promise<boolean> {
  try {
    process.kill(pid, signal);
  } catch {
    return true;
  }
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    const info = await processInfo(pid);
    if (!info || info.state === 'Z') return true;
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
  return false;
}

/** Reads /proc on Linux, asks `ps` elsewhere; undefined when no such process exists. */
export async function processInfo(pid: number): Promise<ProcessInfo | undefined> {
  if (process.platform === 'linux') {
    try {
      const [stat, cmdline] = await Promise.all([
        readFile(`/proc/${pid}/stat`, 'utf8'),
        readFile(`/proc/${pid}/cmdline`, 'utf8'),
      ]);
      // "pid (comm) state ppid …": comm may contain spaces and parentheses, so split after the last ')'.
      const [state = '', ppid = ''] = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
      return { ppid: Number.parseInt(ppid, 10), command: cmdline.split('\0').join(' ').trim(), state };
    } catch {
      return undefined;
    }
  }
  try {
    const { stdout } = await run('ps', ['-o', 'ppid=,state=,command=', '-p', String(pid)]);
    const match = stdout.trim().match(/^(\d+)\s+(\S+)\s+(.*)$/);
    if (!match) return undefined;
    return { ppid: Number.parseInt(match[1]!, 10), state: match[2]!.charAt(0), command: match[3]! };
  } catch {
    return undefined;
  }
}
