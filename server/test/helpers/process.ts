import { type ChildProcess, spawn } from 'node:child_process';
import { readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { TEST_ENCRYPTION_KEY } from './encryption-key.ts';

const MAIN = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../../src/main.ts');

/**
 * The environment of a CLI process on the database at `databaseUrl` (a test context's), with that
 * context's encryption key (it decrypts what the context's app stored), no file storage and
 * warnings only; `extra` adds to or overrides it.
 */
export function cliEnvOn(databaseUrl: string, extra: Record<string, string> = {}): Record<string, string> {
  return {
    DATABASE_URL: databaseUrl,
    ENCRYPTION_KEY: TEST_ENCRYPTION_KEY.toString('base64'),
    DATA_DIR: 'memory://',
    LOG_LEVEL: 'warn',
    ...extra,
  };
}

/** A `postwright` CLI process started by a test, with what it printed so far. */
export interface CliProcess {
  child: ChildProcess;
  output(): string;
  /** Resolves with the first match of `pattern` in the output (fails after `timeoutMs` or on exit). */
  waitForOutput(pattern: RegExp, timeoutMs?: number): Promise<RegExpMatchArray>;
  /** Sends `signal` and resolves with the exit code once the process is gone. */
  stop(signal?: NodeJS.Signals): Promise<number | null>;
}

/**
 * Starts `node server/src/main.ts <args>` on this Node (24) with `env` over a clean environment.
 * `ownProcessGroup` makes it a process group leader, so a test can signal the group as a terminal's
 * Ctrl-C does (`process.kill(-pid, 'SIGINT')`).
 */
export function startCli(
  args: string[],
  env: Record<string, string>,
  options: { ownProcessGroup?: boolean } = {},
): CliProcess {
  const child = spawn(process.execPath, [MAIN, ...args], {
    env: { PATH: process.env.PATH ?? '', HOME: process.env.HOME ?? '', ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
    detached: options.ownProcessGroup ?? false,
  });
  let output = '';
  child.stdout?.on('data', (chunk: Buffer) => {
    output += chunk.toString();
  });
  child.stderr?.on('data', (chunk: Buffer) => {
    output += chunk.toString();
  });
  const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
  return {
    child,
    output: () => output,
    waitForOutput(pattern, timeoutMs = 60_000) {
      // Event-driven, no polling: checked on every chunk of output and on exit.
      return new Promise<RegExpMatchArray>((resolve, reject) => {
        const finish = (outcome: () => void) => {
          clearTimeout(timer);
          child.stdout?.off('data', check);
          child.stderr?.off('data', check);
          child.off('exit', onExit);
          outcome();
        };
        const check = () => {
          const match = output.match(pattern);
          if (match) finish(() => resolve(match));
        };
        const onExit = () => {
          const match = output.match(pattern);
          finish(() =>
            match
              ? resolve(match)
              : reject(new Error(`process exited (${child.exitCode}) before ${pattern}:\n${output}`)),
          );
        };
        const timer = setTimeout(
          () => finish(() => reject(new Error(`timed out waiting for ${pattern}:\n${output}`))),
          timeoutMs,
        );
        // Registered after the listeners that append to `output`, so each check sees the chunk.
        child.stdout?.on('data', check);
        child.stderr?.on('data', check);
        child.once('exit', onExit);
        if (child.exitCode !== null || child.signalCode !== null) onExit();
        else check();
      });
    },
    async stop(signal = 'SIGTERM') {
      if (child.exitCode === null && child.signalCode === null) child.kill(signal);
      return exited;
    },
  };
}

/** The direct children of process `pid` (Linux /proc; none once it is gone). */
export function childPids(pid: number): number[] {
  try {
    return readdirSync(`/proc/${pid}/task`).flatMap((task) => {
      try {
        return readFileSync(`/proc/${pid}/task/${task}/children`, 'utf8')
          .split(' ')
          .filter(Boolean)
          .map(Number);
      } catch {
        return [];
      }
    });
  } catch {
    return [];
  }
}

/** True while process `pid` runs (a zombie, exited but not reaped, counts as gone; Linux /proc). */
export function isAlive(pid: number): boolean {
  try {
    return !/^\d+ \(.*\) Z /.test(readFileSync(`/proc/${pid}/stat`, 'utf8'));
  } catch {
    return false;
  }
}
