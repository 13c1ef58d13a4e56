import type { Browser, HTTPRequest, Page, PDFOptions } from 'puppeteer-core';
import { cleanedForRender, renderContentSecurityPolicy } from '../render-policy.ts';
import { browserAnswers, closeOrKill, killBrowser } from './browser-process.ts';

/** How the bundled renderer drives Chromium (issue #12; `postwright pdf-renderer`, README "PDF"). */
export interface ChromiumPoolOptions {
  /** The Chromium binary (CHROMIUM_PATH, default /usr/bin/chromium). */
  executablePath: string;
  /** Pages rendering at once: one browser, this many reused tabs (PDF_RENDERER_PAGES). */
  pages: number;
  /** Deadline of one render in ms, from the moment it has a page (PDF_RENDER_TIMEOUT_SECONDS). */
  renderTimeoutMs: number;
  /** Hosts (lower-case, no port) pages may load images from over http(s); everything else is blocked. */
  allowedImageHosts: readonly string[];
  /**
   * The browser is closed after this long without a PDF render (ms); the next render starts it
   * again. Screenshots (thumbnails) do not keep it open: after screenshots alone it closes as soon
   * as it is idle, so a template save does not leave a browser running in an idle server.
   */
  idleCloseMs: number;
  /** Most renders waiting for a page; beyond it a render is refused at once (RendererBusyError). */
  maxQueued?: number;
  /**
   * Chromium's console and log messages about the rendered pages (an image refused by the render
   * policy, a failed load), as their text: diagnostics, e.g. why an image is missing from a PDF.
   */
  onPageMessage?: (text: string) => void;
}

/**
 * How a page of the pool gets the render policy (renderContentSecurityPolicy): ONCE, when it is
 * opened, as a `<meta>` written into its document; each render then writes its HTML into that same
 * document (puppeteer's `setContent`: CDP `Page.setDocumentContent`, a `document.open()`), and a
 * document keeps every policy a `<meta>` ever gave it (HTML: `document.open()` leaves the policy
 * container alone). So the pages' HTML carries no policy of its own (cleanedForRender), unlike a
 * Gotenberg's (withRenderPolicy): on a reused page a policy per render piled up, and every later style
 * and image check evaluated them all (session 14, bench:pdf's document, 2 pages: 29 → 12 PDFs/s
 * within ~400 renders, against a steady ~31/s without the policy and ~33/s with it given once).
 * The document stays `about:blank`, as before: a document at a made-up URL served by the
 * interception with the policy as a header was refused images from private addresses (Chromium's
 * private network access) and, over https, had http:// images upgraded.
 */
function policyDocument(policy: string): string {
  return `<!DOCTYPE html><html><head><meta http-equiv="Content-Security-Policy" content="${policy.replaceAll('&', '&amp;').replaceAll('"', '&quot;')}"></head></html>`;
}

/** A render that did not finish within `renderTimeoutMs` (Gotenberg answers 503 for it too). */
export class RenderTimeoutError extends Error {}
/** More renders waiting than `maxQueued`. */
export class RendererBusyError extends Error {}

/** What a screenshot is taken of: the viewport in CSS pixels, PNG or JPEG. */
export interface ScreenshotOptions {
  width: number;
  height: number;
  format: 'png' | 'jpeg';
  fullPage?: boolean;
}

/**
 * How long a CDP call may outlast the render deadline (ms): puppeteer's `protocolTimeout`, which
 * defaults to 180 s, is set to `renderTimeoutMs` plus this, so no call to a wedged browser (opening
 * a page, which runs outside the render's deadline, included) holds a render or a stop longer.
 */
const PROTOCOL_MARGIN_MS = 5_000;

/**
 * How long closing the browser may take before its process is killed (ms). puppeteer's
 * `browser.close()` waits for CDP `Browser.close` to be answered, up to `protocolTimeout`, and only
 * then kills the process: a wedged (stopped, hung) Chromium held a stop for 180 s (review finding,
 * "stop"), past the README's bound.
 */
export const BROWSER_CLOSE_MS = 5_000;

/**
 * How long the browser process has to answer the probe after a failed render (ms) before it is
 * taken for wedged and killed (see ChromiumPool's #replaceIfWedged). It answers in milliseconds,
 * even with a page stuck (see browserAnswers): 2 s is a wide margin for a loaded machine.
 */
export const BROWSER_PROBE_MS = 2_000;

/** The puppeteer-core module, imported on the first render only (idle memory, issue #9). */
type Puppeteer = typeof import('puppeteer-core').default;
let puppeteer: Promise<Puppeteer> | undefined;
function loadPuppeteer(): Promise<Puppeteer> {
  puppeteer ??= import('puppeteer-core').then((module) => module.default);
  return puppeteer;
}

/**
 * One Chromium and a pool of reused pages (issue #12). JavaScript is disabled on every page and
 * every request is intercepted: only `data:`, `about:blank` and images over http(s) from
 * `allowedImageHosts` load; anything else (other hosts, loopback, `file:`, style sheets, frames,
 * fonts) is aborted. Interception sees only the page's own requests, not those Chromium's
 * browser process makes (`<link rel="prefetch">`), so every page's document also carries the render
 * policy (a Content-Security-Policy allowing the same, see {@link policyDocument}) and every
 * page is cleaned of the elements no policy governs (cleanedForRender): together a template cannot
 * make the renderer reach the network.
 * The browser starts on the first render (puppeteer-core is imported then, not before) and is
 * closed after `idleCloseMs` without renders. A page whose render timed out or failed is closed
 * rather than reused; a browser that crashed is started again by the next render, and so is one
 * found wedged after a failed render (#replaceIfWedged).
 */
export class ChromiumPool {
  readonly #options: ChromiumPoolOptions;
  #browser: Promise<Browser> | undefined;
  readonly #free: Page[] = [];
  #active = 0;
  readonly #waiting: (() => void)[] = [];
  #idleTimer: NodeJS.Timeout | undefined;
  /** Until when (ms since epoch) the last PDF render keeps the browser open once idle. */
  #keepOpenUntil = 0;
  #closed = false;
  /** The current browser once launched (the value #browser resolves to), for browserProcessId. */
  #launched: Browser | undefined;
  /** The browser being probed after a failed render (one probe at a time per browser). */
  #probing: Promise<Browser> | undefined;
  /** Kills of wedged browsers in progress: close() waits for them. */
  readonly #kills = new Set<Promise<void>>();
  /** The document a page is opened with: the render policy, see policyDocument. */
  readonly #policyDocument: string;

  constructor(options: ChromiumPoolOptions) {
    this.#options = options;
    this.#policyDocument = policyDocument(renderContentSecurityPolicy(options.allowedImageHosts));
  }

  /** True while a browser is running (started and not yet closed for idleness). */
  get browserRunning(): boolean {
    return this.#browser !== undefined;
  }

  /** The running browser's process id (also its process group's), or undefined while none runs. */
  get browserProcessId(): number | undefined {
    return this.#launched?.process()?.pid;
  }

  /**
   * `html` printed to PDF with `pdf` options (paper size, margins, background).
   * @returns the PDF's bytes.
   * @throws RenderTimeoutError past the deadline, RendererBusyError when the queue is full, or
   *   Chromium's own error (launch failure, crash).
   */
  renderPdf(html: string, pdf: PDFOptions): Promise<Buffer> {
    return this.#withPage(
      html,
      { width: 794, height: 1123 },
      async (page) => Buffer.from(await page.pdf({ ...pdf, timeout: this.#options.renderTimeoutMs })),
      { keepsBrowserOpen: true },
    );
  }

  /** A screenshot of `html` (template thumbnails). @throws as {@link renderPdf}. */
  screenshot(html: string, options: ScreenshotOptions): Promise<Buffer> {
    return this.#withPage(
      html,
      { width: options.width, height: options.height },
      async (page) =>
        Buffer.from(
          await page.screenshot({
            type: options.format,
            fullPage: options.fullPage ?? false,
            captureBeyondViewport: false,
          }),
        ),
      { keepsBrowserOpen: false },
    );
  }

  /**
   * Closes the browser, renders still in progress or not (they fail), and refuses further renders.
   * Ends within about {@link BROWSER_CLOSE_MS}: a browser that does not close by then is killed.
   */
  async close(): Promise<void> {
    this.#closed = true;
    clearTimeout(this.#idleTimer);
    await Promise.all([this.#closeBrowser({ evenIfBusy: true }), ...this.#kills]);
  }

  async #withPage<T>(
    html: string,
    viewport: { width: number; height: number },
    work: (page: Page) => Promise<T>,
    options: { keepsBrowserOpen: boolean },
  ): Promise<T> {
    if (this.#closed) throw new Error('renderer is closed');
    clearTimeout(this.#idleTimer);
    await this.#acquireSlot();
    let page: Page | undefined;
    let reusable = false;
    let launching: Promise<Browser> | undefined;
    try {
      launching = this.#launch();
      const browser = await launching;
      page = this.#free.pop() ?? (await this.#newPage(browser));
      if (page.url() !== 'about:blank') {
        // Navigated away from the document that holds the policy (nothing a page can do without
        // scripts should do that; never render without the policy): a new page in its place.
        page.close().catch(() => {});
        page = await this.#newPage(browser);
      }
      const current = page;
      const rendering = (async () => {
        // A CDP round trip saved per render when the page already has this viewport.
        const size = current.viewport();
        if (size?.width !== viewport.width || size?.height !== viewport.height) {
          await current.setViewport(viewport);
        }
        await current.setContent(await cleanedForRender(html), {
          waitUntil: 'load',
          timeout: this.#options.renderTimeoutMs,
        });
        return work(current);
      })();
      const result = await withDeadline(rendering, this.#options.renderTimeoutMs);
      reusable = true;
      return result;
    } catch (error) {
      if (launching) void this.#replaceIfWedged(launching);
      throw error;
    } finally {
      if (page) {
        if (reusable && !page.isClosed()) this.#free.push(page);
        else {
          page.close().catch(() => {});
        }
      }
      if (options.keepsBrowserOpen) this.#keepOpenUntil = Date.now() + this.#options.idleCloseMs;
      this.#releaseSlot();
    }
  }

  async #acquireSlot(): Promise<void> {
    if (this.#active < this.#options.pages) {
      this.#active++;
      return;
    }
    if (this.#waiting.length >= (this.#options.maxQueued ?? 1000)) {
      throw new RendererBusyError(`more than ${this.#options.maxQueued ?? 1000} renders waiting`);
    }
    // The slot is handed over by #releaseSlot (the count stays as it is).
    await new Promise<void>((resolve) => this.#waiting.push(resolve));
  }

  #releaseSlot(): void {
    const next = this.#waiting.shift();
    if (next) {
      next();
      return;
    }
    this.#active--;
    if (this.#active === 0 && !this.#closed) {
      const delay = Math.max(0, this.#keepOpenUntil - Date.now());
      this.#idleTimer = setTimeout(() => void this.#closeBrowser(), delay);
      this.#idleTimer.unref();
    }
  }

  async #newPage(browser: Browser): Promise<Page> {
    const page = await browser.newPage();
    try {
      await page.setJavaScriptEnabled(false);
      await page.setRequestInterception(true);
      page.on('request', (request) => {
        if (request.isInterceptResolutionHandled()) return;
        if (this.#allowed(request)) void request.continue();
        else void request.abort('blockedbyclient');
      });
      // Within the render's deadline too (a page that cannot open in time is a render that timed out).
      await page.setContent(this.#policyDocument, { timeout: this.#options.renderTimeoutMs });
      const onPageMessage = this.#options.onPageMessage;
      if (onPageMessage) page.on('console', (message) => onPageMessage(message.text()));
      return page;
    } catch (error) {
      page.close().catch(() => {});
      if (error instanceof Error && error.name === 'TimeoutError') {
        throw new RenderTimeoutError(`opening a page timed out after ${this.#options.renderTimeoutMs} ms`);
      }
      throw error;
    }
  }

  #allowed(request: HTTPRequest): boolean {
    const url = request.url();
    if (url.startsWith('data:') || url === 'about:blank') return true;
    if (request.resourceType() !== 'image') return false;
    try {
      const parsed = new URL(url);
      return (
        (parsed.protocol === 'https:' || parsed.protocol === 'http:') &&
        this.#options.allowedImageHosts.includes(parsed.hostname.toLowerCase())
      );
    } catch {
      return false;
    }
  }

  #launch(): Promise<Browser> {
    if (this.#browser) return this.#browser;
    const launching: Promise<Browser> = (async () => {
      const browser = await (await loadPuppeteer()).launch({
        executablePath: this.#options.executablePath,
        headless: true,
        // DevTools over stdin/stdout pipes instead of a port: no local process can drive the browser,
        // and Chromium exits when its parent dies (even by kill -9) instead of living on orphaned.
        pipe: true,
        // puppeteer's own signal handlers would close the browser and exit the process with 130 on
        // Ctrl-C, cutting Postwright's orderly shutdown short; close() is called by the owner instead.
        handleSIGINT: false,
        handleSIGTERM: false,
        handleSIGHUP: false,
        protocolTimeout: this.#options.renderTimeoutMs + PROTOCOL_MARGIN_MS,
        // Chromium refuses to start as root with its sandbox (CI runs as root); JavaScript is off
        // and the network blocked on every page, which is what the sandbox would otherwise guard.
        args: [
          ...(process.getuid?.() === 0 ? ['--no-sandbox'] : []),
          '--disable-dev-shm-usage',
          '--disable-gpu',
          '--disable-extensions',
          '--no-first-run',
          '--mute-audio',
        ],
      });
      // Only this browser's end forgets it: a browser closed for idleness may disconnect after
      // its successor has started.
      browser.on('disconnected', () => this.#forgetBrowser(launching));
      return browser;
    })();
    this.#browser = launching;
    launching.then(
      (browser) => {
        if (this.#browser === launching) this.#launched = browser;
      },
      () => this.#forgetBrowser(launching),
    );
    return launching;
  }

  /** Forgets the current browser (and its pages), or only if it is `which` when given. */
  #forgetBrowser(which?: Promise<Browser>): void {
    if (which && this.#browser !== which) return;
    this.#browser = undefined;
    this.#launched = undefined;
    this.#free.length = 0;
  }

  /**
   * Replaces the browser `launching` resolved to if it is wedged. Called after any failed render (a
   * timeout, mostly): asks the browser process for an answer ({@link browserAnswers}); when none comes
   * within {@link BROWSER_PROBE_MS}, forgets the browser (the next render starts a new one) and kills
   * its process group ({@link killBrowser}). Review finding "wedged Chromium": a hung browser (its
   * processes stopped, a deadlocked browser process) was only closed after `idleCloseMs` without
   * renders, so under steady traffic every render timed out for as long as the traffic lasted. The
   * rule probes the browser rather than counting timeouts: a merely slow template (an image host that
   * never answers, a huge table) times out on its own page while the browser answers at once and its
   * other pages render on; a count would have killed them. Renders in progress on a browser that does
   * not answer fail when it is killed, as they would have at their deadline. Not caught: a browser
   * process that answers while none of its renderers do. Never throws.
   */
  async #replaceIfWedged(launching: Promise<Browser>): Promise<void> {
    if (this.#browser !== launching || this.#probing === launching) return;
    this.#probing = launching;
    try {
      const browser = await launching;
      if (await browserAnswers(browser, BROWSER_PROBE_MS)) return;
      // Closed meanwhile (idleness, close(), a crash): its own path ends it.
      if (this.#browser !== launching) return;
      this.#forgetBrowser(launching);
      const kill = killBrowser(browser);
      this.#kills.add(kill);
      await kill;
      this.#kills.delete(kill);
    } catch {
      // A launch that failed: no browser to replace.
    } finally {
      if (this.#probing === launching) this.#probing = undefined;
    }
  }

  /** Closes the current browser when idle (or `evenIfBusy`), killing it past {@link BROWSER_CLOSE_MS}. */
  async #closeBrowser(options: { evenIfBusy?: boolean } = {}): Promise<void> {
    const browser = this.#browser;
    if (!browser || (this.#active > 0 && !options.evenIfBusy)) return;
    this.#forgetBrowser();
    const running = await browser.catch(() => undefined);
    if (running) await closeOrKill(running, BROWSER_CLOSE_MS);
  }
}

/** `work`, or RenderTimeoutError once `ms` have passed (the page is then closed by the caller). */
async function withDeadline<T>(work: Promise<T>, ms: number): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const deadline = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new RenderTimeoutError(`render timed out after ${ms} ms`)), ms);
  });
  work.catch(() => {});
  try {
    return await Promise.race([work, deadline]);
  } finally {
    clearTimeout(timer);
  }
}
