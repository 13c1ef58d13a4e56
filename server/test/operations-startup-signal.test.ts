import type { ChildProcess } from 'node:child_process';
import { chmodSync, existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { startCli } from './helpers/process.ts';

/** Resolves with the exit code of `child` once it has exited (sends no signal, unlike CliProcess.stop). */
function exitOf(child: ChildProcess): Promise<number | null> {
  if (child.exitCode !== null || child.signalCode !== null) return Promise.resolve(child.exitCode);
  return new Promise((resolve) => child.once('exit', (code) => resolve(code)));
}

/** Resolves once `file` exists (polled every 5 ms); fails after `timeoutMs`. */
async function waitForFile(file: string, timeoutMs = 60_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!existsSync(file)) {
    if (Date.now() > deadline) throw new Error(`${file} did not appear`);
    await new Promise((resolve) => setTimeout(resolve, 5));
  }
}

/** The PID of the postmaster recorded in `pgdata/postmaster.pid` when it is still running. */
function runningPostmaster(pgdata: string): number | undefined {
  let pid: number;
  try {
    pid = Number.parseInt(readFileSync(path.join(pgdata, 'postmaster.pid'), 'utf8').split('\n')[0] ?? '', 10);
  } catch {
    return undefined;
  }
  if (!pid) return undefined;
  try {
    process.kill(pid, 0);
    return pid;
  } catch {
    return undefined;
  }
}

/** Whether the PostgreSQL on `pgdata` is still running after up to `timeoutMs` (its PID file stays while it runs). */
async function stillRunningAfter(pgdata: string, timeoutMs: number): Promise<boolean> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    if (!existsSync(path.join(pgdata, 'postmaster.pid')) || runningPostmaster(pgdata) === undefined)
      return false;
    if (Date.now() > deadline) return true;
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}

/**
 * Review finding, session 18: a SIGTERM while the embedded PostgreSQL started or migrations ran
 * killed `postwright start` at once (Node's default action: the handlers were installed only after
 * start-up) and left the embedded PostgreSQL running without its owner.
 */
describe('a stop signal during start-up', () => {
  const dirs: string[] = [];
  /** A fresh DATA_DIR the server's OS user can enter (as root it runs as "postgres"). */
  const dataDir = () => {
    const dir = mkdtempSync(path.join(tmpdir(), 'postwright-ops-signal-'));
    chmodSync(dir, 0o755);
    dirs.push(dir);
    return dir;
  };
  const start = (dir: string) =>
    startCli(['start'], {
      DATA_DIR: dir,
      PORT: '0',
      HOST: '127.0.0.1',
      BASE_URL: 'http://127.0.0.1:3999',
      LOG_LEVEL: 'warn',
    });
  afterAll(() => {
    for (const dir of dirs) {
      // An orphan left by a failing run: stop it before removing its directory.
      const pgdata = path.join(dir, 'pgdata');
      const orphan = runningPostmaster(pgdata);
      if (orphan) process.kill(orphan, 'SIGQUIT');
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('lets start-up finish, then stops everything, the embedded PostgreSQL last, and exits 0', async () => {
    const dir = dataDir();
    const cli = start(dir);
    try {
      // Written once the cluster exists, just before the server starts: start-up is under way.
      await waitForFile(path.join(dir, 'postgres.owner'));
      cli.child.kill('SIGTERM');
      const code = await Promise.race([
        exitOf(cli.child),
        new Promise<'hung'>((resolve) => setTimeout(() => resolve('hung'), 90_000)),
      ]);
      expect(code, cli.output()).toBe(0);
      expect(cli.output()).toContain('Stopping: a stop signal arrived during start-up.');
      expect(cli.output()).not.toContain('listening on');
      expect(await stillRunningAfter(path.join(dir, 'pgdata'), 0)).toBe(false);
      expect(existsSync(path.join(dir, 'postgres.owner'))).toBe(false);
    } finally {
      cli.child.kill('SIGKILL');
    }
  }, 120_000);

  it('exits at once on a second signal, and the embedded PostgreSQL still stops', async () => {
    const dir = dataDir();
    const pgdata = path.join(dir, 'pgdata');
    const cli = start(dir);
    try {
      // The server has been started and is coming up (or migrations run).
      await waitForFile(path.join(pgdata, 'postmaster.pid'));
      // At once, while it is not ready yet; two different signals, as one signal sent twice may
      // arrive once.
      cli.child.kill('SIGTERM');
      cli.child.kill('SIGINT');
      const code = await Promise.race([
        exitOf(cli.child),
        new Promise<'hung'>((resolve) => setTimeout(() => resolve('hung'), 10_000)),
      ]);
      expect(code, cli.output()).toBe(130);
      // Told to stop (fast shutdown) as the process exits.
      expect(await stillRunningAfter(pgdata, 15_000)).toBe(false);
    } finally {
      cli.child.kill('SIGKILL');
    }
  }, 120_000);
});
