import { spawn } from 'node:child_process';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { loadPdfRendererServer } from '../../src/modules/pdf/index.ts';
import type { RunningPdfRenderer } from '../../src/modules/pdf/renderer/renderer.server.ts';
import { freePort } from './ports.ts';
import { type CliProcess, startCli } from './process.ts';

/** The Chromium the tests drive (CI installs Debian's `chromium`; CHROMIUM_PATH overrides). */
export const TEST_CHROMIUM = process.env.CHROMIUM_PATH || '/usr/bin/chromium';

/**
 * Starts the bundled renderer (the real one, real Chromium) on a free 127.0.0.1 port.
 * `options` override the pool's defaults: 2 pages, a 20 s render deadline, no image hosts,
 * browser idle close after 60 s; `credentials` make it require HTTP Basic authentication.
 */
export async function startTestRenderer(
  options: {
    pages?: number;
    renderTimeoutMs?: number;
    allowedImageHosts?: string[];
    idleCloseMs?: number;
    credentials?: { username: string; password: string };
  } = {},
): Promise<RunningPdfRenderer> {
  const { startPdfRenderer } = await loadPdfRendererServer();
  return startPdfRenderer(
    { host: '127.0.0.1', port: 0 },
    {
      executablePath: TEST_CHROMIUM,
      pages: options.pages ?? 2,
      renderTimeoutMs: options.renderTimeoutMs ?? 20_000,
      allowedImageHosts: options.allowedImageHosts ?? [],
      idleCloseMs: options.idleCloseMs ?? 60_000,
    },
    options.credentials,
  );
}

/** The text of a PDF as poppler's `pdftotext` extracts it (layout kept, UTF-8). */
export function pdfText(pdf: Buffer): Promise<string> {
  return new Promise((resolve, reject) => {
    const child = spawn('pdftotext', ['-layout', '-enc', 'UTF-8', '-', '-']);
    const out: Buffer[] = [];
    const err: Buffer[] = [];
    child.stdout.on('data', (chunk: Buffer) => out.push(chunk));
    child.stderr.on('data', (chunk: Buffer) => err.push(chunk));
    child.on('error', reject);
    child.on('close', (code) =>
      code === 0
        ? resolve(Buffer.concat(out).toString('utf8'))
        : reject(new Error(`pdftotext exited ${code}: ${Buffer.concat(err).toString()}`)),
    );
    child.stdin.end(pdf);
  });
}

/** Page count and first-page size in points (rounded) of a PDF, from poppler's `pdfinfo`. */
export function pdfInfo(pdf: Buffer): Promise<{ pages: number; widthPt: number; heightPt: number }> {
  return new Promise((resolve, reject) => {
    const child = spawn('pdfinfo', ['-']);
    const out: Buffer[] = [];
    child.stdout.on('data', (chunk: Buffer) => out.push(chunk));
    child.on('error', reject);
    child.on('close', () => {
      const text = Buffer.concat(out).toString();
      const pages = /Pages:\s+(\d+)/.exec(text);
      const size = /Page size:\s+([\d.]+) x ([\d.]+) pts/.exec(text);
      if (!pages || !size) return reject(new Error(`pdfinfo gave no page count or size: ${text}`));
      resolve({
        pages: Number(pages[1]),
        widthPt: Math.round(Number(size[1])),
        heightPt: Math.round(Number(size[2])),
      });
    });
    child.stdin.end(pdf);
  });
}

/** An HTTP server on 127.0.0.1 that answers every request with a 1×1 PNG and records its paths. */
export async function startRecordingServer(): Promise<{
  port: number;
  hits: string[];
  server: Server;
  close(): Promise<void>;
}> {
  const hits: string[] = [];
  const png = Buffer.from(
    'iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg==',
    'base64',
  );
  const server = createServer((request, response) => {
    hits.push(request.url ?? '');
    response.writeHead(200, { 'content-type': 'image/png' }).end(png);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    port: (server.address() as AddressInfo).port,
    hits,
    server,
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}

/**
 * `postwright pdf-renderer` as a real process (real Chromium, no database) on a free port of
 * 127.0.0.1 (`env` adds to or overrides its environment, e.g. HOST or credentials); resolves once
 * it printed "PDF renderer listening" (30 s at most; the process is killed if it did not).
 */
export async function startRendererCli(
  env: Record<string, string> = {},
): Promise<{ cli: CliProcess; port: number; url: string }> {
  const port = await freePort();
  const cli = startCli(['pdf-renderer'], {
    HOST: '127.0.0.1',
    PORT: String(port),
    CHROMIUM_PATH: TEST_CHROMIUM,
    DATA_DIR: 'memory://',
    ...env,
  });
  try {
    await cli.waitForOutput(/PDF renderer listening/, 30_000);
  } catch (error) {
    await cli.stop('SIGKILL');
    throw error;
  }
  return { cli, port, url: `http://127.0.0.1:${port}` };
}

/** POSTs `html` to the Gotenberg HTML-to-PDF route of the renderer at `url` (as Postwright's client does). */
export function postHtmlForPdf(
  url: string,
  html: string,
  headers: Record<string, string> = {},
): Promise<Response> {
  const form = new FormData();
  form.append('files', new Blob([html], { type: 'text/html' }), 'index.html');
  return fetch(`${url}/forms/chromium/convert/html`, { method: 'POST', body: form, headers });
}
