/**
 * The dashboard (issue #13): the single-page app built by Vite into `web/dist`
 * (`npm run build:web`, run by npm ci's `prepare`), served by the API process at `/`.
 *
 * - Files of the build are served as they are (`/assets/*` are content-hashed: cached for a year).
 * - Any other GET of a client route (`/setup`, `/login`, `/invite/:token`, `/logs/…`) answers
 *   `index.html`, and the app's router takes over (SPA fallback).
 * - Paths of the server's own namespaces (`/api`, `/docs`, `/t/`, `/files/`, `/healthz`, `/readyz`)
 *   are never answered with the app: a path there that no route matched stays the JSON 404 of
 *   every unknown route, and so does a missing file with an extension (`/missing.js`).
 *
 * Plain `node:fs` streams instead of a static-file plugin: nothing is loaded or read at idle but
 * the app's `index.html` (a few hundred bytes, read on first use).
 */
import { createReadStream } from 'node:fs';
import { readFile, stat } from 'node:fs/promises';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { access } from './access.ts';
import { AppError } from './errors.ts';

/** Where `vite build` writes the app (web/vite.config.ts). */
export const DASHBOARD_DIST = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../../../web/dist');

/** First path segments that belong to the server: never answered with the app. */
const SERVER_PREFIXES = ['api', 'docs', 't', 'files', 'healthz', 'readyz', 'health'];

const CONTENT_TYPES: Record<string, string> = {
  '.html': 'text/html; charset=utf-8',
  '.js': 'text/javascript; charset=utf-8',
  '.mjs': 'text/javascript; charset=utf-8',
  '.css': 'text/css; charset=utf-8',
  '.json': 'application/json; charset=utf-8',
  '.svg': 'image/svg+xml',
  '.png': 'image/png',
  '.ico': 'image/x-icon',
  '.woff2': 'font/woff2',
  '.txt': 'text/plain; charset=utf-8',
  '.map': 'application/json; charset=utf-8',
};

/** Shown at `/` when the dashboard was not built (e.g. `npm ci --ignore-scripts`). */
const NOT_BUILT_PAGE = `<!doctype html><html lang="en"><head><meta charset="utf-8"><title>Postwright</title></head>
<body><h1>Postwright</h1><p>The dashboard is not built. Run <code>npm run build:web</code> and reload.
The API and its reference at <a href="/docs">/docs</a> work without it.</p></body></html>`;

function notFound(request: FastifyRequest): AppError {
  return new AppError('NOT_FOUND', `Route ${request.method} ${request.url.split('?')[0]} not found`);
}

/**
 * Registers `GET /` and `GET /*` (public, hidden from the OpenAPI document) serving the dashboard
 * from `options.dist` (default {@link DASHBOARD_DIST}). Routes registered by other modules match first
 * (Fastify prefers static and parametric routes to the wildcard). Answers 404 NOT_FOUND in the
 * envelope for the server's namespaces and for missing files with an extension; serves a short
 * "not built" page when `dist/index.html` does not exist.
 */
export async function dashboardRoutes(app: FastifyInstance, options: { dist?: string } = {}): Promise<void> {
  const dist = options.dist ?? DASHBOARD_DIST;
  let indexHtml: Promise<string | undefined> | undefined;
  const readIndex = () => {
    indexHtml ??= readFile(path.join(dist, 'index.html'), 'utf8').catch(() => {
      indexHtml = undefined; // built later (npm run build:web while running): try again next time
      return undefined;
    });
    return indexHtml;
  };

  const handler = async (request: FastifyRequest, reply: FastifyReply) => {
    // The router's decoded wildcard (a malformed escape never reaches here: FST_ERR_BAD_URL).
    const pathname = `/${(request.params as { '*'?: string })['*'] ?? ''}`;
    const first = pathname.split('/')[1] ?? '';
    if (SERVER_PREFIXES.includes(first)) throw notFound(request);
    const file = path.join(dist, path.normalize(pathname));
    if (file.startsWith(dist + path.sep) && pathname !== '/' && pathname !== '/index.html') {
      const stats = await stat(file).catch(() => undefined);
      if (stats?.isFile()) {
        const type = CONTENT_TYPES[path.extname(file)] ?? 'application/octet-stream';
        reply.header('content-type', type).header('content-length', stats.size);
        reply.header(
          'cache-control',
          pathname.startsWith('/assets/') ? 'public, max-age=31536000, immutable' : 'no-cache',
        );
        return reply.send(createReadStream(file));
      }
      // A missing file (it has an extension) is not a client route.
      if (path.extname(pathname) !== '') throw notFound(request);
    }
    const html = await readIndex();
    reply.header('content-type', 'text/html; charset=utf-8').header('cache-control', 'no-cache');
    // The app is never framed (clickjacking); the rendered emails inside it are sandboxed iframes.
    reply.header('x-frame-options', 'DENY');
    return reply.send(html ?? NOT_BUILT_PAGE);
  };
  const route = { ...access({ kind: 'public' }), schema: { hide: true } };
  app.get('/', route, handler);
  app.get('/*', route, handler);
}
