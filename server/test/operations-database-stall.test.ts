import { connect, createServer, type Socket } from 'node:net';
import { sql } from 'drizzle-orm';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  openDatabase,
  POOL_CLOSE_TIMEOUT_MS,
  POOL_CONNECTION_TIMEOUT_MS,
  READY_CHECK_TIMEOUT_MS,
} from '../src/db/client.ts';
import { createTestDatabase } from './helpers/database.ts';
import { cliEnvOn, startCli } from './helpers/process.ts';

/**
 * A TCP proxy to PostgreSQL that can stall: from `stall()` on it accepts connections and swallows
 * whatever either side sends, as a frozen server or a network partition does.
 */
async function startStallingProxy(target: URL) {
  let stalled = false;
  const sockets = new Set<Socket>();
  const track = (socket: Socket) => {
    sockets.add(socket);
    socket.on('error', () => {});
    socket.on('close', () => sockets.delete(socket));
  };
  const server = createServer((socket) => {
    track(socket);
    if (stalled) {
      socket.resume();
      return;
    }
    const upstream = connect(Number(target.port || 5432), target.hostname);
    track(upstream);
    socket.on('data', (chunk) => {
      if (!stalled) upstream.write(chunk);
    });
    upstream.on('data', (chunk) => {
      if (!stalled) socket.write(chunk);
    });
    // A partition does not tell either side that the other has gone.
    socket.on('close', () => stalled || upstream.destroy());
    upstream.on('close', () => stalled || socket.destroy());
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const port = (server.address() as { port: number }).port;
  return {
    /** `url` with its host and port replaced by the proxy's. */
    through(url: string): string {
      const proxied = new URL(url);
      proxied.hostname = '127.0.0.1';
      proxied.port = String(port);
      return proxied.toString();
    },
    stall() {
      stalled = true;
    },
    async close() {
      for (const socket of sockets) socket.destroy();
      await new Promise((resolve) => server.close(resolve));
    },
  };
}

/** GET `url`, or 'no answer' after `timeoutMs`. */
async function probe(url: string, timeoutMs: number): Promise<number | 'no answer'> {
  try {
    const response = await fetch(url, { signal: AbortSignal.timeout(timeoutMs) });
    await response.body?.cancel();
    return response.status;
  } catch {
    return 'no answer';
  }
}

/**
 * Review finding, session 18: with a PostgreSQL that accepts connections but never answers,
 * `/readyz` never answered (a load balancer's probes piled up, each holding a pool connection),
 * and a SIGTERM then never finished: the pool's close waited for the stuck probes.
 */
describe('a stalled database', () => {
  let database: Awaited<ReturnType<typeof createTestDatabase>>;
  let proxy: Awaited<ReturnType<typeof startStallingProxy>>;
  beforeAll(async () => {
    database = await createTestDatabase();
    proxy = await startStallingProxy(new URL(database.url));
  });
  afterAll(async () => {
    await proxy?.close();
    await database?.drop();
  });

  it('makes /readyz answer 503 within a few seconds, and a SIGTERM still stops the process', async () => {
    const cli = startCli(
      ['start', '--role', 'api'],
      cliEnvOn(proxy.through(database.url), {
        PORT: '0',
        HOST: '127.0.0.1',
        BASE_URL: 'http://127.0.0.1:3999',
      }),
    );
    try {
      const url = (await cli.waitForOutput(/listening on (http:\/\/[^\s]+)/))[1]!;
      expect(await probe(`${url}/readyz`, 5_000)).toBe(200);
      proxy.stall();
      // A load balancer probing during the outage: each probe answers, none is left hanging.
      const started = Date.now();
      const statuses = await Promise.all([1, 2, 3].map(() => probe(`${url}/readyz`, 10_000)));
      expect(statuses).toEqual([503, 503, 503]);
      expect(Date.now() - started).toBeLessThan(READY_CHECK_TIMEOUT_MS + 3_000);

      const stopping = Date.now();
      const code = await Promise.race([
        cli.stop('SIGTERM'),
        new Promise<'hung'>((resolve) => setTimeout(() => resolve('hung'), 45_000)),
      ]);
      expect(code).toBe(0);
      expect(Date.now() - stopping).toBeLessThan(45_000);
    } finally {
      cli.child.kill('SIGKILL');
    }
  }, 90_000);

  it('bounds the pool: a new connection gives up, and close() cuts a query stuck on the server', async () => {
    const own = await startStallingProxy(new URL(database.url));
    const handle = await openDatabase({ databaseUrl: own.through(database.url), poolSize: 2 });
    try {
      const client = await handle.pool.connect();
      client.on('error', () => {});
      await client.query('select 1');
      own.stall();
      const stuck = client.query('select 1').then(
        () => 'answered',
        () => 'failed',
      );
      // A new connection to the stalled server fails after the pool's connection timeout.
      const connecting = Date.now();
      const failure = await handle.db.execute(sql`select 1`).then(
        () => undefined,
        (error: Error) => error.cause as Error,
      );
      expect(failure?.message).toMatch(/timeout/);
      expect(Date.now() - connecting).toBeLessThan(POOL_CONNECTION_TIMEOUT_MS + 3_000);

      const closing = Date.now();
      const closed = await Promise.race([
        handle.close().then(() => 'closed'),
        new Promise<'hung'>((resolve) => setTimeout(() => resolve('hung'), POOL_CLOSE_TIMEOUT_MS + 10_000)),
      ]);
      expect(closed).toBe('closed');
      expect(Date.now() - closing).toBeLessThan(POOL_CLOSE_TIMEOUT_MS + 3_000);
      expect(await stuck).toBe('failed');
    } finally {
      await own.close();
    }
  }, 60_000);
});
