/** Why a render failed, in `details.cause` of PDF_GENERATION_FAILED (issue #12; spec case rule 5). */
export type RenderFailureCause =
  | 'RENDERER_UNREACHABLE'
  | 'RENDERER_TIMEOUT'
  | 'RENDERER_BUSY'
  | 'RENDERER_ERROR'
  | 'PDF_TOO_LARGE';

/** A render that did not give a document; `failure` says why, `status` and `message` what the renderer said. */
export class RenderFailedError extends Error {
  readonly failure: RenderFailureCause;
  readonly status: number | undefined;

  constructor(failure: RenderFailureCause, message: string, status?: number) {
    super(message);
    this.name = 'RenderFailedError';
    this.failure = failure;
    this.status = status;
  }
}

/** Paper and margins of a PDF, in inches (Gotenberg's form units). */
export interface PaperOptions {
  widthIn: number;
  heightIn: number;
  marginIn: number;
}

/** What the {@link GotenbergClient} needs: the service's base URL, deadline and size cap. */
export interface GotenbergClientOptions {
  /**
   * Base URL of a Gotenberg-compatible service (PDF_RENDERER_URL), no trailing slash needed. Userinfo
   * in it (`http://user:pass@host:3000`, percent-encoded) is sent as HTTP Basic credentials, never
   * as part of the URL.
   */
  baseUrl: string;
  /** HTTP Basic credentials (the bundled renderer's); they take precedence over userinfo in `baseUrl`. */
  credentials?: { username: string; password: string } | undefined;
  /** Deadline of one request, from sending to the last byte of the answer (ms). */
  timeoutMs: number;
  /** Most bytes of one answer (a PDF or an image); beyond it the render fails with PDF_TOO_LARGE. */
  maxBytes: number;
  paper: PaperOptions;
}

/** The `Authorization` header value of HTTP Basic `credentials` (RFC 7617: base64 of `user:password`, UTF-8). */
export function basicAuthorization(credentials: { username: string; password: string }): string {
  return `Basic ${Buffer.from(`${credentials.username}:${credentials.password}`, 'utf8').toString('base64')}`;
}

/** Bytes of the error text kept from a renderer's failed answer. */
const ERROR_TEXT_BYTES = 500;

/**
 * The HTTP client of a Gotenberg-compatible renderer (Gotenberg 8 "Chromium" routes; the bundled
 * `postwright pdf-renderer` answers the same): multipart forms with `index.html`. PDF_RENDERER_URL is
 * operator configuration, so no SSRF policy applies; redirects are refused, every request has a
 * deadline and answers are read up to `maxBytes`. Uses Node's built-in fetch (no import at start).
 */
export class GotenbergClient {
  readonly #options: GotenbergClientOptions;
  /** `Authorization` header of every request but /health, when the service needs credentials. */
  readonly #authorization: string | undefined;

  constructor(options: GotenbergClientOptions) {
    const url = new URL(options.baseUrl);
    const credentials =
      options.credentials ??
      (url.username || url.password
        ? { username: decodeURIComponent(url.username), password: decodeURIComponent(url.password) }
        : undefined);
    url.username = '';
    url.password = '';
    this.#authorization = credentials && basicAuthorization(credentials);
    this.#options = { ...options, baseUrl: url.href.replace(/\/+$/, '') };
  }

  /**
   * `html` as a PDF on the configured paper, backgrounds printed (Gotenberg `convert/html`).
   * @returns the PDF's bytes (at most `maxBytes`).
   * @throws RenderFailedError: RENDERER_UNREACHABLE (connection refused, DNS …), RENDERER_TIMEOUT
   *   (no complete answer in `timeoutMs`, or the renderer's own 503 timeout), RENDERER_ERROR (any
   *   other non-2xx answer), PDF_TOO_LARGE; RENDERER_UNREACHABLE with `options.signal`'s reason as
   *   the message when it aborts first (the request is abandoned: a stopping server cut the request
   *   the render was for).
   */
  renderPdf(html: string, options: { signal?: AbortSignal | undefined } = {}): Promise<Buffer> {
    const { paper } = this.#options;
    const margin = String(paper.marginIn);
    return this.#post('/forms/chromium/convert/html', html, options.signal, {
      paperWidth: String(paper.widthIn),
      paperHeight: String(paper.heightIn),
      marginTop: margin,
      marginBottom: margin,
      marginLeft: margin,
      marginRight: margin,
      printBackground: 'true',
    });
  }

  /**
   * A PNG of `html` in a `width` × `height` CSS-pixel viewport, clipped to it (Gotenberg
   * `screenshot/html`; template thumbnails). @throws RenderFailedError as {@link renderPdf}.
   */
  screenshot(html: string, size: { width: number; height: number }): Promise<Buffer> {
    return this.#post('/forms/chromium/screenshot/html', html, undefined, {
      width: String(size.width),
      height: String(size.height),
      format: 'png',
      clip: 'true',
    });
  }

  /** True when `GET /health` answers 2xx within the deadline. */
  async healthy(): Promise<boolean> {
    try {
      const response = await fetch(`${this.#options.baseUrl}/health`, {
        redirect: 'error',
        signal: AbortSignal.timeout(this.#options.timeoutMs),
      });
      await response.body?.cancel();
      return response.ok;
    } catch {
      return false;
    }
  }

  async #post(
    path: string,
    html: string,
    abandon: AbortSignal | undefined,
    fields: Record<string, string>,
  ): Promise<Buffer> {
    if (abandon?.aborted) throw abandonedFailure(abandon);
    const form = new FormData();
    form.append('files', new Blob([html], { type: 'text/html' }), 'index.html');
    for (const [name, value] of Object.entries(fields)) form.append(name, value);
    const deadline = AbortSignal.timeout(this.#options.timeoutMs);
    const signal = abandon ? AbortSignal.any([deadline, abandon]) : deadline;
    try {
      return await this.#send(path, form, signal);
    } catch (error) {
      if (abandon?.aborted && !deadline.aborted) throw abandonedFailure(abandon);
      throw error;
    }
  }

  async #send(path: string, form: FormData, signal: AbortSignal): Promise<Buffer> {
    let response: Response;
    try {
      response = await fetch(`${this.#options.baseUrl}${path}`, {
        method: 'POST',
        body: form,
        ...(this.#authorization ? { headers: { authorization: this.#authorization } } : {}),
        redirect: 'error',
        signal,
      });
    } catch (error) {
      throw fetchFailure(error);
    }
    if (!response.ok) {
      const text = await readCapped(response, ERROR_TEXT_BYTES, true).catch(() => Buffer.alloc(0));
      const message = `renderer answered ${response.status}: ${text.toString('utf8').trim()}`.slice(0, 600);
      // Gotenberg answers 503 when the conversion exceeded its timeout (the bundled one too).
      throw new RenderFailedError(
        response.status === 503 ? 'RENDERER_TIMEOUT' : 'RENDERER_ERROR',
        message,
        response.status,
      );
    }
    try {
      return await readCapped(response, this.#options.maxBytes, false);
    } catch (error) {
      if (error instanceof RenderFailedError) throw error;
      throw fetchFailure(error);
    }
  }
}

/** The failure of a render abandoned through `signal`: RENDERER_UNREACHABLE, its reason as the message. */
export function abandonedFailure(signal: AbortSignal): RenderFailedError {
  const reason = signal.reason instanceof Error ? signal.reason.message : 'the render was abandoned';
  return new RenderFailedError('RENDERER_UNREACHABLE', reason);
}

/** A fetch error as a {@link RenderFailedError}: a deadline is RENDERER_TIMEOUT, the rest unreachable. */
function fetchFailure(error: unknown): RenderFailedError {
  const name = (error as { name?: string }).name;
  if (name === 'TimeoutError' || name === 'AbortError') {
    return new RenderFailedError('RENDERER_TIMEOUT', 'renderer did not answer in time');
  }
  const cause = (error as { cause?: { code?: string; message?: string } }).cause;
  const detail = cause?.code ?? cause?.message ?? (error instanceof Error ? error.message : String(error));
  return new RenderFailedError('RENDERER_UNREACHABLE', `renderer unreachable: ${detail}`);
}

/**
 * The body of `response`, at most `maxBytes`: beyond it, the first `maxBytes` when `truncate`, else
 * RenderFailedError PDF_TOO_LARGE (the rest is not read).
 */
async function readCapped(response: Response, maxBytes: number, truncate: boolean): Promise<Buffer> {
  const declared = Number(response.headers.get('content-length') ?? Number.NaN);
  if (!truncate && declared > maxBytes) {
    await response.body?.cancel();
    throw new RenderFailedError('PDF_TOO_LARGE', `rendered file of ${declared} bytes exceeds ${maxBytes}`);
  }
  const chunks: Buffer[] = [];
  let size = 0;
  if (!response.body) return Buffer.alloc(0);
  const reader = response.body.getReader();
  for (;;) {
    const { done, value: chunk } = await reader.read();
    if (done) break;
    size += chunk.byteLength;
    if (size > maxBytes) {
      await reader.cancel().catch(() => {});
      if (truncate) {
        chunks.push(Buffer.from(chunk).subarray(0, chunk.byteLength - (size - maxBytes)));
        break;
      }
      throw new RenderFailedError('PDF_TOO_LARGE', `rendered file exceeds ${maxBytes} bytes`);
    }
    chunks.push(Buffer.from(chunk));
  }
  return Buffer.concat(chunks);
}
