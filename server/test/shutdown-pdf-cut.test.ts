import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { connect } from 'node:net';
import type { FastifyInstance } from 'fastify';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildApp } from '../src/app.ts';
import { loadConfig } from '../src/config.ts';
import { type Context, createContext } from '../src/context.ts';
import { AppError } from '../src/http/errors.ts';
import { JobQueue } from '../src/jobs/queue.ts';
import { declareQueues } from '../src/jobs/registry.ts';
import { closeWithin, type HandlerTracker, trackHandlers } from '../src/runtime.ts';
import { TEST_BASE_URL, waitFor } from './helpers/app.ts';
import { createTestDatabase } from './helpers/database.ts';
import { TEST_ENCRYPTION_KEY } from './helpers/encryption-key.ts';
import { createTeamWithKey } from './helpers/sending-team.ts';

/**
 * A stop while sends wait for their PDFs (runtime.ts closeWithin, trackHandlers; README, the
 * `postwright start` row): the handlers a stop cuts, or whose clients hung up before it, fail at
 * once and release their Idempotency-Key claims before the database closes. The app is built as
 * startPostwright builds it: buildApp(context), then trackHandlers(app), then listen. A PDF renderer
 * (PDF_RENDERER_URL) holds every render while `holding` is true.
 */
describe('a stop with sends waiting for their PDFs', () => {
  let holding = true;
  const held: ServerResponse[] = [];
  const renderer = createServer((request: IncomingMessage, response: ServerResponse) => {
    request.resume();
    request.on('end', () => {
      if (holding) {
        held.push(response);
        return;
      }
      response.writeHead(200, { 'content-type': 'application/pdf' }).end('%PDF-1.4 fake');
    });
  });
  let rendererUrl: string;
  let drop: () => Promise<void>;
  let queue: JobQueue;
  let handleClose: () => Promise<void>;
  const apps: { app: FastifyInstance; context: Context; closed?: boolean }[] = [];
  let handle: Awaited<ReturnType<typeof createTestDatabase>>['handle'];

  /** An app built the way startPostwright builds it (trackHandlers before listen). */
  async function startLikeRuntime(): Promise<{
    app: FastifyInstance;
    context: Context;
    handlers: HandlerTracker;
    url: string;
  }> {
    const config = loadConfig({
      BASE_URL: TEST_BASE_URL,
      LOG_LEVEL: 'silent',
      DATA_DIR: 'memory://',
      SETUP_TOKEN: 'test-setup-token-0123456789',
      SMTP_ALLOW_PRIVATE: 'true',
      PDF_RENDERER_URL: rendererUrl,
    });
    const context = await createContext({
      config,
      database: handle,
      queue,
      encryptionKey: TEST_ENCRYPTION_KEY,
    });
    const app = await buildApp(context);
    const handlers = trackHandlers(app);
    const url = await app.listen({ port: 0, host: '127.0.0.1' });
    apps.push({ app, context });
    return { app, context, handlers, url };
  }

  beforeAll(async () => {
    await new Promise<void>((resolve) => renderer.listen(0, '127.0.0.1', resolve));
    rendererUrl = `http://127.0.0.1:${(renderer.address() as AddressInfo).port}`;
    const db = await createTestDatabase('postgres');
    handle = db.handle;
    drop = db.drop;
    queue = new JobQueue(handle);
    await queue.start();
    await declareQueues(queue, loadConfig({ BASE_URL: TEST_BASE_URL, DATA_DIR: 'memory://' }));
    handleClose = async () => {
      for (const { app, context, closed } of apps) {
        if (!closed) {
          app.server.closeAllConnections();
          await app.close();
        }
        await context.close();
      }
      await queue.stop(2_000);
      await drop();
    };
  });
  afterAll(async () => {
    for (const response of held) response.destroy();
    renderer.closeAllConnections();
    await new Promise<void>((resolve) => renderer.close(() => resolve()));
    await handleClose?.();
  });

  it('trackHandlers counts a send whose handler is running (what the stop waits for)', async () => {
    holding = true;
    const { app, handlers, url } = await startLikeRuntime();
    const team = await createTeamWithKey(app);
    // A root-level route is counted.
    const health = await fetch(`${url}/healthz`);
    expect(health.status).toBe(200);
    const answer = fetch(`${url}/api/v1/send`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'x-api-key': team.key, 'idempotency-key': 'tracked' },
      body: JSON.stringify({
        templateId: team.templateId,
        to: 'tracked@example.test',
        pdfAttachments: [{ templateId: team.templateId, filename: 'doc.pdf' }],
      }),
    }).then(
      (response) => response.status,
      () => 'dropped' as const,
    );
    await waitFor(async () => (held.length > 0 ? true : undefined), 10_000, 'the render to arrive');
    // The send's handler is waiting for its render: a stop would have to wait for it.
    const runningDuringRender = handlers.running;
    const start = Date.now();
    await handlers.settled(5_000);
    const settledAfterMs = Date.now() - start;
    holding = false;
    for (const response of held.splice(0)) {
      response.writeHead(200, { 'content-type': 'application/pdf' }).end('%PDF-1.4 fake');
    }
    expect(await answer).toBe(202);
    expect({ runningDuringRender, settledImmediately: settledAfterMs < 100 }).toEqual({
      runningDuringRender: 1,
      settledImmediately: false,
    });
  }, 60_000);

  it('a batch of PDF sends cut at the grace is not stored under its Idempotency-Key (the retry is not answered from it)', async () => {
    holding = true;
    const first = await startLikeRuntime();
    const team = await createTeamWithKey(first.app);
    const headers = {
      'content-type': 'application/json',
      'x-api-key': team.key,
      'idempotency-key': 'batch-cut',
    };
    const item = (to: string) => ({
      templateId: team.templateId,
      to,
      pdfAttachments: [{ templateId: team.templateId, filename: 'doc.pdf' }],
    });
    const body = JSON.stringify({ emails: [item('a@example.test'), item('b@example.test')] });
    const answer = fetch(`${first.url}/api/v1/send/batch`, { method: 'POST', headers, body }).then(
      async (response) => ({ status: response.status, body: await response.json() }),
      () => 'dropped' as const,
    );
    await waitFor(async () => (held.length > 0 ? true : undefined), 10_000, 'the first render to arrive');
    // What runtime.ts closeWithin does once the grace has passed (the batch's item renders fail
    // at once, so no item is left to commit: the refusal must still answer 503).
    first.context.acceptBatcher.refuseNew(
      new AppError('SERVICE_UNAVAILABLE', 'The server is stopping: the email was not accepted'),
    );
    first.context.cutRequests();
    first.app.server.closeAllConnections();
    expect(await answer).toBe('dropped');
    await first.handlers.settled(5_000);
    await new Promise((resolve) => setTimeout(resolve, 500));
    const { rows } = await handle.pool.query(
      `select response_status, response_body from idempotency_keys where key = 'batch-cut'`,
    );
    // The client's connection dropped: it sends the batch again, with the same key, to a restarted server.
    holding = false;
    const second = await startLikeRuntime();
    const retried = await fetch(`${second.url}/api/v1/send/batch`, { method: 'POST', headers, body });
    const retriedBody = (await retried.json()) as {
      data: { results: ({ id: string } | { error: { code: string; message: string } })[] };
    };
    expect({
      stored: rows.map((row) => row.response_status),
      retried: retried.status,
      items: retriedBody.data.results.map((result) =>
        'error' in result ? result.error.message : 'accepted',
      ),
    }).toEqual({ stored: [], retried: 202, items: ['accepted', 'accepted'] });
  }, 60_000);

  it('a request cut while its body is still arriving stops counting at once (no 5 s wait)', async () => {
    const { app, handlers, url } = await startLikeRuntime();
    const team = await createTeamWithKey(app);
    const { port } = new URL(url);
    const socket = connect(Number(port), '127.0.0.1');
    await new Promise<void>((resolve) => socket.once('connect', () => resolve()));
    socket.write(
      `POST /api/v1/send HTTP/1.1\r\nHost: 127.0.0.1\r\ncontent-type: application/json\r\nx-api-key: ${team.key}\r\ncontent-length: 1000\r\n\r\n{"templateId":`,
    );
    socket.on('error', () => {});
    await waitFor(async () => (handlers.running === 1 ? true : undefined), 5_000, 'the request to count');
    app.server.closeAllConnections();
    const started = Date.now();
    await handlers.settled(5_000);
    expect({ running: handlers.running, quick: Date.now() - started < 1_000 }).toEqual({
      running: 0,
      quick: true,
    });
  }, 30_000);
  it('a send whose client gave up before the stop has its render abandoned too (the stop does not leave its key claimed)', async () => {
    holding = true;
    const started = await startLikeRuntime();
    const team = await createTeamWithKey(started.app);
    const before = held.length;
    const client = new AbortController();
    const gone = fetch(`${started.url}/api/v1/send`, {
      method: 'POST',
      signal: client.signal,
      headers: {
        'content-type': 'application/json',
        'x-api-key': team.key,
        'idempotency-key': 'client-gone',
      },
      body: JSON.stringify({
        templateId: team.templateId,
        to: 'gone@example.test',
        pdfAttachments: [{ templateId: team.templateId, filename: 'doc.pdf' }],
      }),
    }).catch(() => 'dropped' as const);
    await waitFor(async () => (held.length > before ? true : undefined), 10_000, 'the render to arrive');
    // The client's own timeout: it disconnects while the slow renderer renders; then the server is stopped.
    client.abort();
    expect(await gone).toBe('dropped');
    await new Promise((resolve) => setTimeout(resolve, 200));
    // runtime.ts stop(): closeWithin, then the handlers' settle in parallel with the workers' stop.
    await closeWithin(started.app, 10_000);
    apps.find((entry) => entry.app === started.app)!.closed = true;
    const settleStart = Date.now();
    await started.handlers.settled(5_000);
    const waitedMs = Date.now() - settleStart;
    const { rows } = await handle.pool.query(
      `select response_status from idempotency_keys where key = 'client-gone'`,
    );
    // Here the database would close: a claim still here (response_status null) answers the
    // client's retry 409 IN_PROGRESS for 5 minutes (ABANDONED_AFTER_SECONDS).
    expect({ settledQuickly: waitedMs < 1_000, claims: rows }).toEqual({ settledQuickly: true, claims: [] });
  }, 60_000);
});
