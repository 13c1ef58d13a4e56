import { readFileSync } from 'node:fs';
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import Fastify from 'fastify';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadConfig } from '../src/config.ts';
import { createPdfRenderer } from '../src/modules/pdf/index.ts';
import { trackHandlers } from '../src/runtime.ts';
import { createTestContext, type TestContext, waitFor } from './helpers/app.ts';
import { postHtmlForPdf, startRendererCli, TEST_CHROMIUM } from './helpers/pdf.ts';
import { freePort } from './helpers/ports.ts';
import { childPids, cliEnvOn, isAlive, startCli } from './helpers/process.ts';
import { createTeamWithKey } from './helpers/sending-team.ts';

/**
 * Stopping around PDF renders (review findings "stop" 1-3), with real processes and real Chromium:
 * a wedged browser is killed instead of holding a stop for puppeteer's 180 s protocol timeout; the
 * bundled renderer's close ends once its last render is answered, not after a client's 72 s
 * keep-alive; a send cut by the stop's grace while a slow PDF_RENDERER_URL renders releases its
 * Idempotency-Key. A wedged or slow Chromium is made by SIGSTOP on its browser process.
 */

/** Every descendant of `pid`. */
function descendantsOf(pid: number): number[] {
  return childPids(pid).flatMap((child) => [child, ...descendantsOf(child)]);
}

function isChromium(pid: number): boolean {
  try {
    return /chrom/i.test(readFileSync(`/proc/${pid}/comm`, 'utf8'));
  } catch {
    return false;
  }
}

/** The Chromium browser process `pid` started (puppeteer launches it as a direct child). */
function browserOf(pid: number): number {
  const browser = childPids(pid).find(isChromium);
  if (browser === undefined) throw new Error(`no Chromium under ${pid}`);
  return browser;
}

/** Resumes and kills what a failed test may have left stopped. */
function killAll(pids: number[]): void {
  for (const pid of pids) {
    try {
      process.kill(pid, 'SIGCONT');
      process.kill(pid, 'SIGKILL');
    } catch {}
  }
}

/** Resolves `promise`'s value, or 'hung' after `ms` (a stop past its bound fails fast, not at 180 s). */
function within<T>(promise: Promise<T>, ms: number): Promise<T | 'hung'> {
  return Promise.race([promise, new Promise<'hung'>((resolve) => setTimeout(() => resolve('hung'), ms))]);
}

/** A page that takes Chromium about a second to print (a 3,000-row table). */
const SLOW_PAGE = `<table>${'<tr><td>row</td><td>of a long table</td></tr>'.repeat(3_000)}</table>`;

/** `postwright pdf-renderer` on a free port, and a render through it (status and when it answered). */
async function rendererCli() {
  const { cli, url } = await startRendererCli();
  const render = (html: string) => {
    return postHtmlForPdf(url, html).then(
      async (response) => ({
        status: response.status,
        size: (await response.arrayBuffer()).byteLength,
        at: Date.now(),
      }),
      () => ({ status: 'dropped' as const, size: 0, at: Date.now() }),
    );
  };
  return { cli, render };
}

describe('postwright pdf-renderer stopping', () => {
  it('SIGTERM with a wedged Chromium kills it and exits within seconds, not after the 180 s protocol timeout', async () => {
    const { cli, render } = await rendererCli();
    let chromium: number[] = [];
    try {
      expect((await render('<p>warm</p>')).status).toBe(200);
      chromium = descendantsOf(cli.child.pid!).filter(isChromium);
      process.kill(browserOf(cli.child.pid!), 'SIGSTOP');
      const started = Date.now();
      const code = await within(cli.stop('SIGTERM'), 20_000);
      // The browser gets BROWSER_CLOSE_MS (5 s) to close, then is killed.
      expect(code).toBe(0);
      expect(Date.now() - started).toBeLessThan(15_000);
      await waitFor(async () => (chromium.some(isAlive) ? undefined : true), 10_000, 'Chromium to be gone');
    } finally {
      cli.child.kill('SIGKILL');
      killAll(chromium.filter(isAlive));
    }
  }, 40_000);

  it('SIGTERM during a render answers it and exits right after, not a keep-alive timeout later', async () => {
    const { cli, render } = await rendererCli();
    let chromium: number[] = [];
    try {
      expect((await render('<p>warm</p>')).status).toBe(200);
      chromium = descendantsOf(cli.child.pid!).filter(isChromium);
      const browser = browserOf(cli.child.pid!);
      // Held, the render is surely in progress when the stop begins.
      process.kill(browser, 'SIGSTOP');
      const answer = render(SLOW_PAGE);
      await new Promise((resolve) => setTimeout(resolve, 300));
      const stopped = within(cli.stop('SIGTERM'), 30_000).then((code) => ({ code, at: Date.now() }));
      await new Promise((resolve) => setTimeout(resolve, 1_000));
      process.kill(browser, 'SIGCONT');
      const answered = await answer;
      expect(answered.status).toBe(200);
      const { code, at } = await stopped;
      expect(code).toBe(0);
      // Closing the browser takes well under a second; the client's idle connection used to hold
      // the close for Fastify's 72 s keepAliveTimeout.
      expect(at - answered.at).toBeLessThan(5_000);
    } finally {
      cli.child.kill('SIGKILL');
      killAll(chromium.filter(isAlive));
    }
  }, 40_000);
});

describe('the in-process bundled renderer stopping', () => {
  it('close() during a render ends once it is answered, not after the client keep-alive', async () => {
    const config = loadConfig({ CHROMIUM_PATH: TEST_CHROMIUM, PDF_RENDERER_PAGES: '1' });
    const renderer = createPdfRenderer(config, { bundled: true })!;
    let chromium: number[] = [];
    try {
      await renderer.renderPdf('<p>warm</p>', 'team-a');
      chromium = descendantsOf(process.pid).filter(isChromium);
      const browser = browserOf(process.pid);
      process.kill(browser, 'SIGSTOP');
      const answer = renderer.renderPdf(SLOW_PAGE, 'team-a').then(
        (pdf) => ({ bytes: pdf.length, at: Date.now() }),
        (error: unknown) => ({ bytes: 0, at: Date.now(), error }),
      );
      await new Promise((resolve) => setTimeout(resolve, 300));
      const closed = within(renderer.close(), 30_000).then((outcome) => ({ outcome, at: Date.now() }));
      await new Promise((resolve) => setTimeout(resolve, 1_000));
      process.kill(browser, 'SIGCONT');
      const answered = await answer;
      expect(answered.bytes).toBeGreaterThan(1_000);
      const { outcome, at } = await closed;
      expect(outcome).not.toBe('hung');
      expect(at - answered.at).toBeLessThan(5_000);
      await waitFor(async () => (chromium.some(isAlive) ? undefined : true), 10_000, 'Chromium to be gone');
    } finally {
      await within(renderer.close(), 10_000);
      killAll(chromium.filter(isAlive));
    }
  }, 40_000);
});

describe('postwright start stopping while a PDF_RENDERER_URL renders', () => {
  /** The first render request is held unanswered (a slow renderer); later ones answer at once. */
  const held: ServerResponse[] = [];
  let firstRenderArrived: () => void;
  const firstRender = new Promise<void>((resolve) => {
    firstRenderArrived = resolve;
  });
  const renderer = createServer((request: IncomingMessage, response: ServerResponse) => {
    request.resume();
    request.on('end', () => {
      if (held.length === 0) {
        held.push(response);
        firstRenderArrived();
        return;
      }
      response.writeHead(200, { 'content-type': 'application/pdf' }).end('%PDF-1.4 fake');
    });
  });
  let rendererUrl: string;
  let ctx: TestContext;

  beforeAll(async () => {
    await new Promise<void>((resolve) => renderer.listen(0, '127.0.0.1', resolve));
    rendererUrl = `http://127.0.0.1:${(renderer.address() as AddressInfo).port}`;
    ctx = await createTestContext('postgres', { PDF_RENDERER_URL: rendererUrl });
  });
  afterAll(async () => {
    await ctx?.close();
    for (const response of held) response.destroy();
    renderer.closeAllConnections();
    await new Promise<void>((resolve) => renderer.close(() => resolve()));
  });

  it('a send cut by the grace gives its Idempotency-Key back: the retry is accepted, not 409 IN_PROGRESS', async () => {
    const team = await createTeamWithKey(ctx.app);
    const body = {
      templateId: team.templateId,
      to: 'retry@example.test',
      pdfAttachments: [{ templateId: team.templateId, filename: 'doc.pdf' }],
    };
    const headers = {
      'content-type': 'application/json',
      'x-api-key': team.key,
      'idempotency-key': 'retry-me',
    };
    const port = await freePort();
    const cli = startCli(
      ['start', '--role', 'api'],
      cliEnvOn(ctx.app.ctx.database.connectionString, {
        HOST: '127.0.0.1',
        PORT: String(port),
        BASE_URL: 'http://127.0.0.1:3999',
        PDF_RENDERER_URL: rendererUrl,
      }),
    );
    try {
      await cli.waitForOutput(/listening on/);
      const first = fetch(`http://127.0.0.1:${port}/api/v1/send`, {
        method: 'POST',
        headers,
        body: JSON.stringify(body),
      }).then(
        (response) => response.status,
        () => 'dropped' as const,
      );
      await within(firstRender, 10_000);
      const started = Date.now();
      // The grace is 10 s (SHUTDOWN_GRACE_MS); the cut handler then ends at once.
      expect(await within(cli.stop('SIGTERM'), 25_000)).toBe(0);
      expect(Date.now() - started).toBeLessThan(20_000);
      expect(await first).toBe('dropped');
      const { rows } = await ctx.app.ctx.database.pool.query(
        `select response_status from idempotency_keys where key = 'retry-me'`,
      );
      expect(rows).toEqual([]);
      // The client sends it again (README: "its client, whose connection dropped, may send it again").
      const retried = await ctx.app.inject({ method: 'POST', url: '/api/v1/send', headers, payload: body });
      expect(retried.statusCode).toBe(202);
    } finally {
      cli.child.kill('SIGKILL');
    }
  }, 60_000);
});

describe('trackHandlers: what a stop waits for before the database closes', () => {
  it('settles when the handler of a cut request ends, not when its connection closed, and within its bound', async () => {
    const app = Fastify();
    let release!: () => void;
    const gate = new Promise<void>((resolve) => {
      release = resolve;
    });
    let ended = false;
    app.post('/slow', async () => {
      await gate;
      ended = true;
      return { ok: true };
    });
    const handlers = trackHandlers(app);
    const url = await app.listen({ port: 0, host: '127.0.0.1' });
    try {
      const cut = fetch(`${url}/slow`, { method: 'POST' }).then(
        (response) => response.status,
        () => 'dropped' as const,
      );
      await waitFor(async () => (handlers.running === 1 ? true : undefined), 5_000, 'the handler to start');
      const closing = app.close();
      app.server.closeAllConnections();
      await closing;
      expect(await cut).toBe('dropped');
      // Fastify's close is over; the handler is not.
      expect(handlers.running).toBe(1);
      const settled = handlers.settled(10_000).then(() => ended);
      setTimeout(release, 300);
      expect(await settled).toBe(true);
      expect(handlers.running).toBe(0);
    } finally {
      release();
      await app.close();
    }
    // A handler that never ends holds the wait no longer than its bound.
    const other = Fastify();
    other.get('/stuck', () => new Promise(() => {}));
    const stuck = trackHandlers(other);
    const otherUrl = await other.listen({ port: 0, host: '127.0.0.1' });
    try {
      const hanging = fetch(`${otherUrl}/stuck`).catch(() => 'dropped');
      await waitFor(async () => (stuck.running === 1 ? true : undefined), 5_000, 'the stuck handler');
      const started = Date.now();
      await stuck.settled(300);
      expect(Date.now() - started).toBeLessThan(2_000);
      expect(stuck.running).toBe(1);
      other.server.closeAllConnections();
      await hanging;
    } finally {
      await other.close();
    }
  });
});
