import { connect } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { SHUTDOWN_GRACE_MS } from '../src/runtime.ts';
import { createTestContext, type TestContext } from './helpers/app.ts';
import { startCli } from './helpers/process.ts';

/**
 * A SIGTERM'd server stops in bounded time whatever its clients do (review finding, session 15:
 * one connection holding a request open, its body announced but never sent, kept `postwright
 * start` running after SIGTERM until the client let go, its workers still claiming jobs).
 */
describe('graceful shutdown', () => {
  let ctx: TestContext;
  beforeAll(async () => {
    ctx = await createTestContext('postgres');
  });
  afterAll(() => ctx?.close());

  it('stops within its grace period while a client holds a request open', async () => {
    const cli = startCli(['start', '--role', 'api'], {
      DATABASE_URL: ctx.app.ctx.database.connectionString,
      ENCRYPTION_KEY: Buffer.alloc(32, 7).toString('base64'),
      PORT: '0',
      HOST: '127.0.0.1',
      BASE_URL: 'http://127.0.0.1:3999',
      DATA_DIR: 'memory://',
      LOG_LEVEL: 'warn',
    });
    try {
      const url = new URL((await cli.waitForOutput(/listening on (http:\/\/[^\s]+)/))[1]!);
      const socket = connect(Number(url.port), url.hostname);
      socket.on('error', () => {});
      await new Promise<void>((resolve) => socket.once('connect', resolve));
      socket.write(
        'POST /api/auth/sign-in/email HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n{',
      );
      // Trickle a byte now and then, as a client keeping the request alive would.
      const trickle = setInterval(() => socket.write(' '), 1_000);
      await new Promise((resolve) => setTimeout(resolve, 500));
      const started = Date.now();
      const code = await Promise.race([
        cli.stop('SIGTERM'),
        new Promise<'hung'>((resolve) => setTimeout(() => resolve('hung'), SHUTDOWN_GRACE_MS + 15_000)),
      ]);
      clearInterval(trickle);
      socket.destroy();
      expect(code).toBe(0);
      expect(Date.now() - started).toBeLessThan(SHUTDOWN_GRACE_MS + 10_000);
    } finally {
      cli.child.kill('SIGKILL');
    }
  }, 60_000);
});
