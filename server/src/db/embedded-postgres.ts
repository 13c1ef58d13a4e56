import { type ChildProcess, spawn } from 'node:child_process';
import { closeSync, openSync } from 'node:fs';
import { mkdir, open, readFile, rename, rm, stat, writeFile } from 'node:fs/promises';
import { createServer } from 'node:net';
import path from 'node:path';
import {
  type EmbeddedLayout,
  EmbeddedPostgresError,
  embeddedLayout,
  ensureCluster,
  loadPostgresBinaries,
  serverAccount,
  serverEnvironment,
} from './embedded-postgres-cluster.ts';
import { recoverStaleServer } from './embedded-postgres-recovery.ts';

export { EmbeddedPostgresError };

/** A PostgreSQL server this process started from the `@embedded-postgres` binaries. */
export interface EmbeddedPostgres {
  /** `postgres://` URL of the `postgres` database, for pg and pg-boss (changes between starts). */
  connectionString: string;
  /** PID of the postmaster. */
  pid: number;
  /**
   * Stops the server once its sessions have ended (close the pools first): smart shutdown, then fast
   * after 10 s, immediate after 30 s more. Resolves once the server has exited.
   */
  stop(): Promise<void>;
}

export interface EmbeddedPostgresOptions {
  /** DATA_DIR: the cluster lives in `<dataDir>/pgdata` (README "DATA_DIR contents"). */
  dataDir: string;
  /**
   * `socket`: a Unix socket inside `pgdata` only (no TCP at all); `tcp`: a free port on 127.0.0.1.
   * Default: socket, unless its path is too long for a Unix socket (107 bytes) or on Windows.
   */
  listen?: 'socket' | 'tcp';
  /** Extra server settings (`-c name=value`), e.g. `fsync: 'off'` for a throw-away test server. */
  settings?: Record<string, string>;
  /** Where progress notes go (recovering an orphan, …); console.log by default. */
  log?: (line: string) => void;
}

const SOCKET_PORT = 5432;
const MAX_SOCKET_PATH = 100;
const READY_TIMEOUT_MS = 120_000;
const LOG_ROTATE_BYTES = 10 * 1024 * 1024;

/**
 * Server settings for a PostgreSQL that serves one Postwright process (issue #9, idle memory):
 * its pools open at most 5 + 4 connections (db/client.ts, jobs/queue.ts), so 25 slots leave
 * room for `psql` and a second process during a restart, and size the shared arrays accordingly;
 * nothing replicates from it (no logical replication launcher). Idle memory (measured with
 * `npm run bench:idle-memory`, PostgreSQL's processes together: ≈ 31 → 25 MB PSS): 16 MB of shared
 * buffers (default 128 MB; a small instance's working set fits), WAL buffers of 1 MB, no parallel
 * query workers, one autovacuum worker, no JIT (its LLVM library is never loaded). The checkpointer,
 * background writer, WAL writer and autovacuum launcher stay. Overridable by `settings`.
 */
export const EMBEDDED_SERVER_SETTINGS: Readonly<Record<string, string>> = {
  max_connections: '25',
  max_logical_replication_workers: '0',
  shared_buffers: '16MB',
  wal_buffers: '1MB',
  max_worker_processes: '2',
  max_parallel_workers: '0',
  max_parallel_workers_per_gather: '0',
  autovacuum_max_workers: '1',
  jit: 'off',
  huge_pages: 'off',
};

/**
 * Starts PostgreSQL on DATA_DIR, initialising the cluster on first use (ARCHITECTURE.md "Runtime
 * shape": `npm start` needs no other service). The server runs in its own session, so signals
 * meant for Postwright (Ctrl-C) do not reach it and Postwright stops it last; it is also stopped
 * when this process exits. A server orphaned by a crash (`kill -9`) is stopped before the new start
 * (see recoverStaleServer). Rejects with a message that includes the server's last log lines when
 * it does not come up within 120 s.
 */
export async function startEmbeddedPostgres(options: EmbeddedPostgresOptions): Promise<EmbeddedPostgres> {
  const log = options.log ?? ((line: string) => console.log(line));
  const layout = embeddedLayout(options.dataDir);
  const binaries = await loadPostgresBinaries();
  await mkdir(layout.dataDir, { recursive: true });
  const account = await serverAccount(layout.dataDir);
  const password = await ensureCluster(layout, binaries, account);
  await recoverStaleServer(layout, log);
  await writeFile(layout.ownerFile, `${process.pid}\n`);

  const listen = options.listen ?? defaultListen(layout.pgdata);
  for (let attempt = 1; ; attempt++) {
    const port = listen === 'socket' ? SOCKET_PORT : await freeLoopbackPort();
    const settings: Record<string, string> = {
      listen_addresses: listen === 'tcp' ? '127.0.0.1' : '',
      // A list setting: quoted, so a path with a comma or a space stays one directory.
      unix_socket_directories: listen === 'socket' ? `"${layout.pgdata.replaceAll('"', '""')}"` : '',
      ...EMBEDDED_SERVER_SETTINGS,
      ...options.settings,
    };
    const args = ['-D', layout.pgdata, '-p', String(port)];
    for (const [name, value] of Object.entries(settings)) args.push('-c', `${name}=${value}`);
    const logOffset = await prepareLog(layout.logFile);
    const logFd = openSync(layout.logFile, 'a', 0o600);
    let child: ChildProcess;
    try {
      child = spawn(binaries.postgres, args, {
        ...(account ?? {}),
        env: serverEnvironment(),
        stdio: ['ignore', logFd, logFd],
        detached: true,
      });
    } finally {
      closeSync(logFd);
    }
    // Stops the server should this process exit before it is ready (a second stop signal during
    // start-up exits at once: review finding, session 18); running() keeps it for the server's life.
    const stopOnExit = stopOnProcessExit(child);
    const failure = await waitUntilReady(child, layout, logOffset);
    if (!failure) {
      const host = listen === 'socket' ? `localhost:${port}` : `127.0.0.1:${port}`;
      const query = listen === 'socket' ? `?host=${encodeURIComponent(layout.pgdata)}` : '';
      return running(
        child,
        layout,
        `postgres://postgres:${password}@${host}/postgres${query}`,
        log,
        stopOnExit,
      );
    }
    process.off('exit', stopOnExit);
    // Another program took the free port between our probe and the server's bind: pick another.
    if (listen === 'tcp' && attempt < 3 && /could not bind|address already in use/i.test(failure)) continue;
    await removeOwnFile(layout.ownerFile);
    throw new EmbeddedPostgresError(`The embedded PostgreSQL in ${layout.pgdata} did not start. ${failure}`);
  }
}

function defaultListen(pgdata: string): 'socket' | 'tcp' {
  if (process.platform === 'win32') return 'tcp';
  return Buffer.byteLength(path.join(pgdata, `.s.PGSQL.${SOCKET_PORT}`)) <= MAX_SOCKET_PATH
    ? 'socket'
    : 'tcp';
}

/**
 * Last resort when the process exits without stop() (an uncaught error, process.exit): the signal
 * is sent synchronously, the server shuts down on its own after we are gone. Returns the listener,
 * for `process.off('exit', …)`.
 */
function stopOnProcessExit(child: ChildProcess): () => void {
  const onExit = () => {
    if (child.exitCode === null && child.signalCode === null) child.kill('SIGINT');
  };
  process.on('exit', onExit);
  return onExit;
}

function running(
  child: ChildProcess,
  layout: EmbeddedLayout,
  connectionString: string,
  log: (line: string) => void,
  onExit: () => void,
): EmbeddedPostgres {
  let stopping: Promise<void> | undefined;
  child.once('exit', (code, signal) => {
    if (!stopping)
      log(
        `The embedded PostgreSQL exited unexpectedly (${signal ?? `code ${code}`}); see ${layout.logFile}.`,
      );
  });
  return {
    connectionString,
    pid: child.pid!,
    stop() {
      stopping ??= (async () => {
        process.off('exit', onExit);
        // Smart first: a pool's last Terminate message may still be on its way to its backend.
        const stopped =
          (await stopChild(child, 'SIGTERM', 10_000)) ||
          (await stopChild(child, 'SIGINT', 30_000)) ||
          (await stopChild(child, 'SIGQUIT', 10_000));
        if (!stopped)
          log(`The embedded PostgreSQL (PID ${child.pid}) did not stop; the next start will stop it.`);
        await removeOwnFile(layout.ownerFile);
      })();
      return stopping;
    },
  };
}

/** Resolves undefined once postmaster.pid says "ready", or with the reason the server failed. */
async function waitUntilReady(child: ChildProcess, layout: EmbeddedLayout, logOffset: number) {
  const exited = new Promise<string>((resolve) => {
    child.once('error', (error) => resolve(`Could not run ${child.spawnfile}: ${error.message}.`));
    child.once('exit', (code, signal) => resolve(`The server exited (${signal ?? `code ${code}`}).`));
  });
  let outcome: string | undefined;
  void exited.then((reason) => {
    outcome = reason;
  });
  const deadline = Date.now() + READY_TIMEOUT_MS;
  while (outcome === undefined) {
    const lines = (await readFile(path.join(layout.pgdata, 'postmaster.pid'), 'utf8').catch(() => '')).split(
      '\n',
    );
    if (lines[0] === String(child.pid) && lines[7]?.trim() === 'ready') return undefined;
    if (Date.now() > deadline) {
      child.kill('SIGQUIT');
      outcome = `It was not ready after ${READY_TIMEOUT_MS / 1000} s.`;
      break;
    }
    await new Promise((resolve) => setTimeout(resolve, 25));
  }
  return `${outcome} Its log (${layout.logFile}) says:\n${await logSince(layout.logFile, logOffset)}`;
}

async function stopChild(child: ChildProcess, signal: NodeJS.Signals, timeoutMs: number): Promise<boolean> {
  if (child.exitCode !== null || child.signalCode !== null) return true;
  const exited = new Promise<boolean>((resolve) => child.once('exit', () => resolve(true)));
  child.kill(signal);
  const timer = new Promise<boolean>((resolve) => setTimeout(() => resolve(false), timeoutMs).unref());
  return Promise.race([exited, timer]);
}

/** Rotates a log over 10 MB to `postgres.log.1`; returns the size this start's lines begin at. */
async function prepareLog(logFile: string): Promise<number> {
  const size = await stat(logFile).then(
    (s) => s.size,
    () => 0,
  );
  if (size <= LOG_ROTATE_BYTES) return size;
  await rename(logFile, `${logFile}.1`);
  return 0;
}

async function logSince(logFile: string, offset: number): Promise<string> {
  const handle = await open(logFile, 'r').catch(() => undefined);
  if (!handle) return '(no log)';
  try {
    const { size } = await handle.stat();
    const length = Math.min(size - offset, 8192);
    const buffer = Buffer.alloc(Math.max(length, 0));
    await handle.read(buffer, 0, buffer.length, size - buffer.length);
    return buffer.toString('utf8').trim() || '(nothing)';
  } finally {
    await handle.close();
  }
}

async function freeLoopbackPort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(0, '127.0.0.1', resolve);
  });
  const address = server.address();
  await new Promise((resolve) => server.close(resolve));
  if (!address || typeof address === 'string')
    throw new EmbeddedPostgresError('Could not find a free loopback port.');
  return address.port;
}

/**
 * Removes `postgres.owner` when it names this process: a start that lost a race with another removed
 * the winner's, and a later start then took the winner's running server for an orphan and stopped
 * it (review finding, session 15).
 */
async function removeOwnFile(ownerFile: string): Promise<void> {
  const owner = Number.parseInt(await readFile(ownerFile, 'utf8').catch(() => ''), 10);
  if (owner === process.pid) await rm(ownerFile, { force: true });
}
