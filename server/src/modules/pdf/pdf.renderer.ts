import { randomBytes } from 'node:crypto';
import { accessSync, constants } from 'node:fs';
import type { Config } from '../../config.ts';
import { abandonedFailure, GotenbergClient, RenderFailedError } from './pdf.client.ts';
import { paperOf } from './pdf.print.ts';
import { withRenderPolicy } from './render-policy.ts';
import { RenderQueue } from './render-queue.ts';
import type { RunningPdfRenderer } from './renderer/renderer.server.ts';

/** Most bytes of one rendered PDF (issue #12: ≤ 10 MB each); also the cap of a thumbnail. */
export const MAX_PDF_BYTES = 10 * 1024 * 1024;

/** The bundled renderer closes its Chromium after this long without a render (ms). */
export const BROWSER_IDLE_CLOSE_MS = 60_000;

/** How long the client waits beyond the render deadline (upload, queueing for a page, download). */
const CLIENT_GRACE_MS = 5_000;

/** Renders of one team waiting for the renderer at once in one process (RenderQueue). */
const PDF_RENDERS_WAITING_PER_TEAM = 100;

/**
 * What the send path and the thumbnail job render through (issue #12): a Gotenberg-compatible
 * service. `source` says which: the configured PDF_RENDERER_URL, or the bundled renderer this
 * process starts on first use.
 */
export interface PdfRenderer {
  readonly source: 'url' | 'bundled';
  /**
   * @see GotenbergClient.renderPdf — the rendered PDF's bytes, made when `teamId`'s turn comes
   * (RenderQueue). These are the renders of requests (a send's PDFs, made at accept): once
   * `requestsCut` (see {@link createPdfRenderer}) aborts, one waiting for its turn or for the
   * renderer's answer fails at once, and a new one is refused.
   * @throws RenderFailedError (also RENDERER_BUSY and RENDERER_TIMEOUT from the queue;
   *   RENDERER_UNREACHABLE once `requestsCut` aborted).
   */
  renderPdf(html: string, teamId: string): Promise<Buffer>;
  /**
   * @see GotenbergClient.screenshot — a PNG, in `teamId`'s turn (template thumbnails: worker jobs,
   * which a stopping worker waits for, so `requestsCut` leaves them alone). @throws RenderFailedError
   * as {@link renderPdf}, but for `requestsCut`.
   */
  screenshot(html: string, size: { width: number; height: number }, teamId: string): Promise<Buffer>;
  /**
   * The bundled renderer's base URL (`http://127.0.0.1:<port>`, no credentials) once it is
   * listening, for diagnostics; undefined before, after close, and for PDF_RENDERER_URL.
   */
  readonly bundledUrl: string | undefined;
  /** Stops the bundled renderer and its browser, if this process started them. Idempotent. */
  close(): Promise<void>;
}

/** True when `path` is an executable file (Chromium "is found", issue #12). */
export function chromiumAvailable(path: string): boolean {
  try {
    accessSync(path, constants.X_OK);
    return true;
  } catch {
    return false;
  }
}

type RendererConfig = Pick<
  Config,
  | 'PDF_RENDERER_URL'
  | 'CHROMIUM_PATH'
  | 'PDF_PAPER_SIZE'
  | 'PDF_MARGIN_MM'
  | 'PDF_RENDER_TIMEOUT_SECONDS'
  | 'PDF_RENDERER_PAGES'
  | 'PDF_ALLOWED_IMAGE_HOSTS'
>;

/**
 * The process's PDF renderer, or undefined when there is none (then a requested PDF is
 * PDF_NOT_CONFIGURED, spec case rule 6): PDF_RENDERER_URL when set; otherwise, when `bundled` (the
 * `postwright start` process) and Chromium is at CHROMIUM_PATH, the bundled renderer, started in
 * this process on a free 127.0.0.1 port at the first render — neither puppeteer-core nor Chromium is
 * loaded before (idle memory, issue #9), and Chromium is closed again after
 * {@link BROWSER_IDLE_CLOSE_MS} without renders. The bundled renderer requires HTTP Basic
 * credentials made at random for this process (192 bits), so no other local process can make its
 * Chromium render; they never leave the process.
 * Either way the process hands the renderer at most PDF_RENDERER_PAGES renders at once, shared
 * between teams in turn ({@link RenderQueue}: a team waits at most PDF_RENDER_TIMEOUT_SECONDS for
 * its turn, with at most {@link PDF_RENDERS_WAITING_PER_TEAM} renders waiting).
 * `options.requestsCut` is aborted when a stopping server cuts the requests still in progress
 * (Context.cutRequests): their PDF renders end at once (PdfRenderer.renderPdf), so their handlers
 * fail and release what they hold (an Idempotency-Key's claim) before the database closes, instead
 * of waiting for a slow renderer for up to PDF_RENDER_TIMEOUT_SECONDS (review finding, "stop").
 */
export function createPdfRenderer(
  config: RendererConfig,
  options: { bundled: boolean; requestsCut?: AbortSignal | undefined },
): PdfRenderer | undefined {
  const cut = options.requestsCut;
  const timeoutMs = config.PDF_RENDER_TIMEOUT_SECONDS * 1000;
  const queue = new RenderQueue({
    slots: config.PDF_RENDERER_PAGES,
    maxWaitingPerTeam: PDF_RENDERS_WAITING_PER_TEAM,
    maxWaitMs: timeoutMs,
  });
  const clientFor = (baseUrl: string, credentials?: { username: string; password: string }) =>
    new GotenbergClient({
      baseUrl,
      credentials,
      timeoutMs: timeoutMs + CLIENT_GRACE_MS,
      maxBytes: MAX_PDF_BYTES,
      paper: paperOf(config),
    });
  if (config.PDF_RENDERER_URL) {
    const client = clientFor(config.PDF_RENDERER_URL);
    // The renderer there may allow any URL (Gotenberg does by default): the page's own policy
    // keeps a template from making it fetch anything but PDF_ALLOWED_IMAGE_HOSTS' images.
    const policed = (html: string) => withRenderPolicy(html, config.PDF_ALLOWED_IMAGE_HOSTS);
    return {
      source: 'url',
      bundledUrl: undefined,
      renderPdf: (html, teamId) =>
        queue.run(teamId, async () => client.renderPdf(await policed(html), { signal: cut }), cut),
      screenshot: (html, size, teamId) =>
        queue.run(teamId, async () => client.screenshot(await policed(html), size)),
      close: async () => {},
    };
  }
  if (!options.bundled || !chromiumAvailable(config.CHROMIUM_PATH)) return undefined;

  let started: Promise<{ server: RunningPdfRenderer; client: GotenbergClient }> | undefined;
  let listening: RunningPdfRenderer | undefined;
  let closed = false;
  const start = () => {
    started ??= (async () => {
      const { startPdfRenderer } = await import('./renderer/renderer.server.ts');
      const credentials = { username: 'postwright', password: randomBytes(24).toString('base64url') };
      const server = await startPdfRenderer(
        { host: '127.0.0.1', port: 0 },
        {
          executablePath: config.CHROMIUM_PATH,
          pages: config.PDF_RENDERER_PAGES,
          renderTimeoutMs: timeoutMs,
          allowedImageHosts: config.PDF_ALLOWED_IMAGE_HOSTS,
          idleCloseMs: BROWSER_IDLE_CLOSE_MS,
        },
        credentials,
      );
      listening = server;
      return { server, client: clientFor(server.url, credentials) };
    })();
    started.catch(() => {
      started = undefined;
    });
    return started.catch((error: unknown) => {
      throw new RenderFailedError(
        'RENDERER_UNREACHABLE',
        `bundled renderer did not start: ${error instanceof Error ? error.message : String(error)}`,
      );
    });
  };
  return {
    source: 'bundled',
    get bundledUrl() {
      return listening?.url;
    },
    async renderPdf(html, teamId) {
      if (closed) throw new RenderFailedError('RENDERER_UNREACHABLE', 'renderer is closed');
      if (cut?.aborted) throw abandonedFailure(cut);
      const { client } = await start();
      return queue.run(teamId, () => client.renderPdf(html, { signal: cut }), cut);
    },
    async screenshot(html, size, teamId) {
      if (closed) throw new RenderFailedError('RENDERER_UNREACHABLE', 'renderer is closed');
      const { client } = await start();
      return queue.run(teamId, () => client.screenshot(html, size));
    },
    async close() {
      closed = true;
      const running = started;
      started = undefined;
      listening = undefined;
      if (running) await (await running.catch(() => undefined))?.server.close();
    },
  };
}
