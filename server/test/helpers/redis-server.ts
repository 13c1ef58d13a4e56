import { type ChildProcess, spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { freePort } from './auth.ts';

/** A redis-server of a test's own, on a free loopback port, that the test can kill and bring back. */
export interface OwnRedis {
  /** `redis://127.0.0.1:<port>` */
  url: string;
  /** SIGKILL: gone at once, as in a crash or a lost host; resolves once the process has exited. */
  kill(): Promise<void>;
  /** Starts it again on the same port (empty: nothing is persisted). */
  restart(): Promise<void>;
  close(): Promise<void>;
}

/** Starts `redis-server` without persistence on a free port; resolves once it accepts connections. */
export async function startOwnRedis(): Promise<OwnRedis> {
  const port = await freePort();
  const dir = mkdtempSync(path.join(tmpdir(), 'postwright-redis-'));
  let child: ChildProcess | undefined;

  const start = async () => {
    const started = spawn(
      'redis-server',
      ['--port', String(port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no', '--dir', dir],
      { stdio: ['ignore', 'pipe', 'pipe'] },
    );
    child = started;
    let output = '';
    await new Promise<void>((resolve, reject) => {
      const onData = (chunk: Buffer) => {
        output += chunk.toString();
        if (output.includes('Ready to accept connections')) resolve();
      };
      started.stdout?.on('data', onData);
      started.stderr?.on('data', onData);
      started.once('exit', (code) => reject(new Error(`redis-server exited (${code}):\n${output}`)));
      started.once('error', reject);
    });
  };
  const kill = async () => {
    const running = child;
    child = undefined;
    if (!running || running.exitCode !== null || running.signalCode !== null) return;
    const exited = new Promise<void>((resolve) => running.once('exit', () => resolve()));
    running.kill('SIGKILL');
    await exited;
  };

  await start();
  return {
    url: `redis://127.0.0.1:${port}`,
    kill,
    restart: start,
    async close() {
      await kill();
      rmSync(dir, { recursive: true, force: true });
    },
  };
}
