import { createServer as createHttpServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { createServer as createTcpServer } from 'node:net';
import puppeteer from 'puppeteer-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadConfig } from '../src/config.ts';
import { createPdfRenderer } from '../src/modules/pdf/index.ts';
import type { RunningPdfRenderer } from '../src/modules/pdf/renderer/renderer.server.ts';
import { pdfText, startTestRenderer, TEST_CHROMIUM } from './helpers/pdf.ts';

/*
 * Review finding, session 13: the render policy (a Content-Security-Policy) does not govern
 * navigation or Chromium's preconnects. A template's `<meta http-equiv="refresh">` made a renderer
 * at PDF_RENDERER_URL (Gotenberg: JavaScript on, every URL allowed by default) load an internal URL
 * and print its answer; a `<link rel="preconnect">` made even the bundled renderer open connections
 * to internal ports. Pages are now cleaned of such elements before any renderer sees them.
 */

async function listen(server: Server | ReturnType<typeof createTcpServer>): Promise<number> {
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return (server.address() as AddressInfo).port;
}

/**
 * A stand-in for Gotenberg's `convert/html` route with its defaults: real Chromium, JavaScript on,
 * no URL filtering, the page printed once the network is idle (what Gotenberg waits for unless
 * `skipNetworkIdleEvent`).
 */
async function startPermissiveRenderer() {
  const browser = await puppeteer.launch({
    executablePath: TEST_CHROMIUM,
    headless: true,
    pipe: true,
    args: [...(process.getuid?.() === 0 ? ['--no-sandbox'] : []), '--disable-dev-shm-usage', '--disable-gpu'],
  });
  const server = createHttpServer(async (request, response) => {
    const chunks: Buffer[] = [];
    for await (const chunk of request) chunks.push(chunk as Buffer);
    const form = await new Response(Buffer.concat(chunks), {
      headers: { 'content-type': request.headers['content-type'] ?? '' },
    }).formData();
    const html = await (form.get('files') as Blob).text();
    const page = await browser.newPage();
    try {
      await page.setContent(html, { waitUntil: 'load', timeout: 10_000 });
      await page.waitForNetworkIdle({ idleTime: 300, timeout: 5_000 }).catch(() => {});
      const pdf = await page.pdf();
      response.writeHead(200, { 'content-type': 'application/pdf' }).end(Buffer.from(pdf));
    } catch (error) {
      response.writeHead(500).end(String(error));
    } finally {
      await page.close();
    }
  });
  const port = await listen(server);
  return {
    url: `http://127.0.0.1:${port}`,
    close: async () => {
      server.close();
      await browser.close();
    },
  };
}

describe('pages cleaned of navigation before a renderer sees them', () => {
  let internal: Server;
  let internalPort: number;
  const internalHits: string[] = [];
  let permissive: Awaited<ReturnType<typeof startPermissiveRenderer>>;
  let bundled: RunningPdfRenderer;

  beforeAll(async () => {
    internal = createHttpServer((request, response) => {
      internalHits.push(request.url ?? '');
      response.writeHead(200, { 'content-type': 'text/html' }).end('<h1>AKIA-INTERNAL-SECRET</h1>');
    });
    internalPort = await listen(internal);
    permissive = await startPermissiveRenderer();
    bundled = await startTestRenderer();
  });

  afterAll(async () => {
    internal?.close();
    await permissive?.close();
    await bundled?.close();
  });

  it('a meta refresh to an internal URL reaches neither the internal server nor the PDF (PDF_RENDERER_URL)', async () => {
    const renderer = createPdfRenderer(loadConfig({ PDF_RENDERER_URL: permissive.url }), { bundled: false });
    internalHits.length = 0;
    try {
      const pdf = await renderer!.renderPdf(
        `<meta http-equiv="refresh" content="0;url=http://127.0.0.1:${internalPort}/latest/meta-data/"><h1>Invoice 42</h1>`,
        'team_a',
      );
      const text = await pdfText(pdf);
      expect(text).toContain('Invoice 42');
      expect(text).not.toContain('AKIA-INTERNAL-SECRET');
    } finally {
      await renderer!.close();
    }
    expect(internalHits).toEqual([]);
  });

  it('a preconnect to an internal port opens no connection from the bundled renderer', async () => {
    let connections = 0;
    const port = createTcpServer((socket) => {
      connections++;
      socket.destroy();
    });
    const portNumber = await listen(port);
    try {
      const body = new FormData();
      const html = [
        `<link rel="preconnect" href="http://127.0.0.1:${portNumber}" crossorigin>`,
        `<link rel="preconnect" href="http://127.0.0.1:${portNumber}">`,
        `<link rel="dns-prefetch" href="http://127.0.0.1:${portNumber}">`,
        '<h1>Receipt</h1>',
      ].join('');
      body.append('files', new Blob([html], { type: 'text/html' }), 'index.html');
      const response = await fetch(`${bundled.url}/forms/chromium/convert/html`, { method: 'POST', body });
      expect(response.status).toBe(200);
      expect(await pdfText(Buffer.from(await response.arrayBuffer()))).toContain('Receipt');
      await new Promise((resolve) => setTimeout(resolve, 500));
    } finally {
      port.close();
    }
    expect(connections).toBe(0);
  });
});
