import { createHash, timingSafeEqual } from 'node:crypto';
import multipart from '@fastify/multipart';
import Fastify, { type FastifyInstance, type FastifyRequest } from 'fastify';
import type { PDFOptions } from 'puppeteer-core';
import { basicAuthorization } from '../pdf.client.ts';
import {
  ChromiumPool,
  type ChromiumPoolOptions,
  RendererBusyError,
  RenderTimeoutError,
} from './chromium-pool.ts';

/** Most bytes of one form part (index.html); Gotenberg itself has no lower limit. */
const MAX_PART_BYTES = 10 * 1024 * 1024;

/** A running bundled renderer: where it listens and how to stop it (and its browser). */
export interface RunningPdfRenderer {
  /** `http://<host>:<port>`, without a trailing slash. */
  url: string;
  app: FastifyInstance;
  pool: ChromiumPool;
  close(): Promise<void>;
}

/** HTTP Basic credentials the renderer requires (Gotenberg's `--api-enable-basic-auth`). */
export interface BasicCredentials {
  username: string;
  password: string;
}

/**
 * A check of `Authorization` headers against `credentials`: the SHA-256 digests of the expected
 * and the received header are compared in constant time, so neither the length nor a prefix of the
 * secret leaks through the answer's timing.
 */
function authorizationCheck(credentials: BasicCredentials): (header: string | undefined) => boolean {
  const digest = (value: string) => createHash('sha256').update(value, 'utf8').digest();
  const expected = digest(basicAuthorization(credentials));
  return (header) => header !== undefined && timingSafeEqual(digest(header), expected);
}

/** A client mistake in a form (Gotenberg answers 400 with a plain-text message). */
class FormError extends Error {}

/** The form of a Gotenberg Chromium route: `index.html` and the text fields. */
async function readForm(request: FastifyRequest): Promise<{ html: string; fields: Map<string, string> }> {
  let html: string | undefined;
  const fields = new Map<string, string>();
  if (!request.isMultipart()) throw new FormError('Expected a multipart/form-data body');
  for await (const part of request.parts({ limits: { fileSize: MAX_PART_BYTES, files: 20, fields: 50 } })) {
    if (part.type === 'file') {
      const bytes = await part.toBuffer();
      if (part.filename === 'index.html') html = bytes.toString('utf8');
    } else fields.set(part.fieldname, String(part.value));
  }
  if (html === undefined) throw new FormError("Form file 'index.html' is required");
  return { html, fields };
}

/** A Gotenberg form number (inches, a scale …); `fallback` when absent. @throws FormError when not a number. */
function numberField(fields: Map<string, string>, name: string, fallback: number): number {
  const raw = fields.get(name);
  if (raw === undefined || raw === '') return fallback;
  const value = Number(raw);
  if (!Number.isFinite(value) || value < 0) throw new FormError(`form field '${name}' must be a number`);
  return value;
}

/** A Gotenberg form boolean; `fallback` when absent. */
function booleanField(fields: Map<string, string>, name: string, fallback: boolean): boolean {
  const raw = fields.get(name);
  return raw === undefined || raw === '' ? fallback : raw === 'true';
}

/**
 * puppeteer PDF options from Gotenberg's form fields (Gotenberg 8 "Page properties": paperWidth and
 * paperHeight in inches, default 8.5 × 11; margins in inches, default 0.39; printBackground,
 * landscape, scale, preferCssPageSize).
 */
function pdfOptionsOf(fields: Map<string, string>): PDFOptions {
  const inches = (name: string, fallback: number) => `${numberField(fields, name, fallback)}in`;
  return {
    width: inches('paperWidth', 8.5),
    height: inches('paperHeight', 11),
    margin: {
      top: inches('marginTop', 0.39),
      bottom: inches('marginBottom', 0.39),
      left: inches('marginLeft', 0.39),
      right: inches('marginRight', 0.39),
    },
    printBackground: booleanField(fields, 'printBackground', false),
    landscape: booleanField(fields, 'landscape', false),
    scale: Math.min(2, Math.max(0.1, numberField(fields, 'scale', 1))),
    preferCSSPageSize: booleanField(fields, 'preferCssPageSize', false),
  };
}

/**
 * The bundled Gotenberg-compatible renderer (issue #12) as a Fastify app over `pool`:
 * `GET /health` → `{status: "up", details: {chromium: {status}}}`;
 * `POST /forms/chromium/convert/html` (multipart, `index.html` + Gotenberg page properties) →
 * `application/pdf`; `POST /forms/chromium/screenshot/html` (`index.html`, `width`, `height`,
 * `format` png|jpeg, `clip`) → the image. Errors as Gotenberg answers them, plain text: 400 for a bad
 * form, 503 when the render timed out or too many are waiting, 500 when Chromium failed.
 *
 * With `credentials`, every route but `GET /health` needs them as HTTP Basic authentication and
 * answers 401 with `WWW-Authenticate: Basic` without them, as Gotenberg does with
 * `--api-enable-basic-auth` (its /health never needs credentials, so probes work).
 */
export function buildPdfRendererApp(pool: ChromiumPool, credentials?: BasicCredentials): FastifyInstance {
  const app = Fastify({ logger: false, bodyLimit: MAX_PART_BYTES });
  void app.register(multipart);

  if (credentials) {
    const authorized = authorizationCheck(credentials);
    app.addHook('onRequest', async (request, reply) => {
      if (request.routeOptions.url === '/health' || authorized(request.headers.authorization)) return;
      return reply
        .code(401)
        .header('www-authenticate', 'Basic realm="Postwright PDF renderer", charset="UTF-8"')
        .type('text/plain')
        .send('Unauthorized');
    });
  }

  app.get('/health', async () => ({
    status: 'up',
    details: { chromium: { status: 'up', running: pool.browserRunning } },
  }));

  app.post('/forms/chromium/convert/html', async (request, reply) => {
    const { html, fields } = await readForm(request);
    const pdf = await pool.renderPdf(html, pdfOptionsOf(fields));
    return reply
      .type('application/pdf')
      .header('content-disposition', 'attachment; filename="index.pdf"')
      .send(pdf);
  });

  app.post('/forms/chromium/screenshot/html', async (request, reply) => {
    const { html, fields } = await readForm(request);
    const format = fields.get('format') ?? 'png';
    if (format !== 'png' && format !== 'jpeg') throw new FormError("form field 'format' must be png or jpeg");
    const image = await pool.screenshot(html, {
      width: Math.min(4000, Math.max(1, Math.round(numberField(fields, 'width', 800)))),
      height: Math.min(4000, Math.max(1, Math.round(numberField(fields, 'height', 600)))),
      format,
      fullPage: !booleanField(fields, 'clip', false),
    });
    return reply.type(`image/${format}`).send(image);
  });

  app.setErrorHandler((error: Error, _request, reply) => {
    const code = (error as { code?: string }).code ?? '';
    if (error instanceof FormError || code.startsWith('FST_')) {
      return reply.code(400).type('text/plain').send(error.message);
    }
    if (error instanceof RenderTimeoutError) {
      return reply.code(503).type('text/plain').send(`Service Unavailable: ${error.message}`);
    }
    if (error instanceof RendererBusyError) {
      return reply.code(503).type('text/plain').send(`Service Unavailable: ${error.message}`);
    }
    return reply.code(500).type('text/plain').send(`Chromium failed: ${error.message}`);
  });
  return app;
}

/**
 * Starts the bundled renderer on `host:port` (port 0: any free port) with a {@link ChromiumPool}
 * over `pool` options, requiring `credentials` when given (see {@link buildPdfRendererApp}).
 * Chromium is not started until the first render.
 * @returns where it listens and `close()`, which stops the server and the browser: it refuses new
 *   connections, answers the renders in progress, then closes the browser (ChromiumPool.close, at
 *   most about 5 s). Once `close()` has begun, every answer carries `Connection: close` and idle
 *   connections are closed, so `close()` ends as soon as the last render is answered: a client's
 *   keep-alive connection (undici keeps one for the server's `Keep-Alive: timeout=72`, Fastify's
 *   default `keepAliveTimeout`) held the close for 72 s after its render (review finding, "stop").
 */
export async function startPdfRenderer(
  listen: { host: string; port: number },
  pool: ChromiumPoolOptions,
  credentials?: BasicCredentials,
): Promise<RunningPdfRenderer> {
  const chromium = new ChromiumPool(pool);
  const app = buildPdfRendererApp(chromium, credentials);
  let closing = false;
  app.addHook('onSend', (_request, reply, payload, done) => {
    if (closing) reply.header('connection', 'close');
    done(null, payload);
  });
  // An answer whose headers went out just before close() began keeps its connection: closed here.
  app.addHook('onResponse', (_request, _reply, done) => {
    if (closing) app.server.closeIdleConnections();
    done();
  });
  await app.listen(listen);
  const address = app.server.address();
  const port = typeof address === 'object' && address ? address.port : listen.port;
  const host = listen.host === '0.0.0.0' || listen.host === '::' ? '127.0.0.1' : listen.host;
  return {
    url: `http://${host.includes(':') ? `[${host}]` : host}:${port}`,
    app,
    pool: chromium,
    async close() {
      closing = true;
      await app.close();
      await chromium.close();
    },
  };
}
