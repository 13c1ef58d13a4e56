/**
 * The dashboard (issue #13): the single-page app built by Vite into `web/dist`
 * (`npm run build:web`, run by npm ci's `prepare`), served by the API process at `/`.
 *
 * It is the not-found fallback (installErrorHandling's `fallback`), so every route of the server
 * matches first, and the router's own errors (a parameter over its length limit) stay what they are:
 * - a GET of a file of the build serves it (`/assets/*` are content-hashed: cached for a year);
 * - a GET of one of the app's own routes ({@link CLIENT_ROUTES}: `/`, `/setup`, `/login`,
 *   `/invite/:token`, `/logs/…`) answers `index.html` and the app's router takes over (SPA fallback);
 * - everything else stays the JSON 404: paths of the server's own namespaces (`/api`, `/docs`, `/t/`,
 *   `/files/`, `/healthz`, `/readyz`), any path the app does not route (so a mistyped API URL, or a
 *   traversal such as `/files/%2E%2E/%2E%2E/etc/passwd` that URL parsing turns into `/etc/passwd`,
 *   gets the same 404 as before the dashboard), missing files (`/missing.js`) and other methods.
 *
 * Plain `node:fs` instead of a static-file plugin: nothing is loaded at idle, and only the app's
 * `index.html` (a few hundred bytes) is kept in memory once asked for.
 */
import { createReadStream } from 'node:fs';
import { readFile, stat } from 'node:fs/promises';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import type { FastifyReply, FastifyRequest } from 'fastify';
import type { NotFoundFallback } from './error-handler.ts';

/** Where `vite build` writes the app (web/vite.config.ts). */
export const DASHBOARD_DIST = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../../../web/dist');

/** First path segments that belong to the server: never answered with the app. */
const SERVER_PREFIXES = new Set(['api', 'docs', 't', 'files', 'healthz', 'readyz', 'health']);

/**
 * First path segments of the app's routes (web/src/App.tsx; server/test/dashboard-serving.test.ts
 * checks that every route there is listed): only these answer `index.html`.
 */
export const CLIENT_ROUTES = new Set([
  'setup',
  'login',
  'invite',
  'templates',
  'logs',
  'adapters',
  'api-keys',
  'webhooks',
  'team',
]);

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

/** Shown for the app's paths when the dashboard was not built (e.g. `npm ci --ignore-scripts`). */
const NOT_BUILT_PAGE = `<!doctype html><html lang="en"><head><meta charset="utf-8"><title>Postwright</title></head>
<body><h1>Postwright</h1><p>The dashboard is not built. Run <code>npm run build:web</code> and reload.
The API and its reference at <a href="/docs">/docs</a> work without it.</p></body></html>`;

/** The decoded path of `url`, or undefined when it is malformed or climbs out (`..`). */
function cleanPath(url: string): string | undefined {
  let pathname: string;
  try {
    pathname = decodeURIComponent(url.split('?')[0] ?? '/');
  } catch {
    return undefined;
  }
  if (pathname.includes('\0') || pathname.split(/[/\\]/).includes('..')) return undefined;
  return pathname;
}

/**
 * The dashboard page's Content-Security-Policy (review finding, session 14: it had none, so any
 * future HTML-injection bug would run with the session's full power): scripts only from this
 * origin (the built bundle has no inline script), API calls to this origin, no plugins, no
 * `<base>`, forms posting here only, never framed. Styles may be inline (Mantine injects
 * `<style>` elements and style attributes) or style sheets from https hosts, images may come from
 * any http(s) host and fonts from https hosts: the template previews and rendered emails
 * (sandboxed `srcdoc` iframes, which inherit this policy) show the images, style sheets and web
 * fonts the emails link, as a mail client does.
 */
const DASHBOARD_CONTENT_SECURITY_POLICY = [
  "default-src 'self'",
  "script-src 'self'",
  "style-src 'self' 'unsafe-inline' https:",
  "img-src 'self' data: blob: https: http:",
  "font-src 'self' data: https:",
  "connect-src 'self'",
  "object-src 'none'",
  "base-uri 'none'",
  "form-action 'self'",
  "frame-ancestors 'none'",
].join('; ');

/**
 * The not-found fallback that serves the dashboard from `options.dist` (default
 * {@link DASHBOARD_DIST}): answers GET and HEAD of the app's files and client routes (true) and
 * leaves everything else to the JSON 404 (false). Serves a short "not built" page when
 * `dist/index.html` does not exist.
 */
export function dashboardFallback(options: { dist?: string } = {}): NotFoundFallback {
  const dist = options.dist ?? DASHBOARD_DIST;
  let indexHtml: Promise<string | undefined> | undefined;
  const readIndex = () => {
    indexHtml ??= readFile(path.join(dist, 'index.html'), 'utf8').catch(() => {
      indexHtml = undefined; // built later (npm run build:web while running): look again next time
      return undefined;
    });
    return indexHtml;
  };

  return async (request: FastifyRequest, reply: FastifyReply) => {
    if (request.method !== 'GET' && request.method !== 'HEAD') return false;
    const pathname = cleanPath(request.url);
    if (pathname === undefined || SERVER_PREFIXES.has(pathname.split('/')[1] ?? '')) return false;
    if (pathname !== '/' && pathname !== '/index.html') {
      const file = path.join(dist, pathname);
      const stats = await stat(file).catch(() => undefined);
      if (stats?.isFile()) {
        reply
          .code(200)
          .header('content-type', CONTENT_TYPES[path.extname(file)] ?? 'application/octet-stream')
          .header('content-length', stats.size)
          .header(
            'cache-control',
            pathname.startsWith('/assets/') ? 'public, max-age=31536000, immutable' : 'no-cache',
          );
        reply.send(request.method === 'HEAD' ? undefined : createReadStream(file));
        return true;
      }
      // A missing file, or a path the app does not route, is the JSON 404.
      if (!CLIENT_ROUTES.has(pathname.split('/')[1] ?? '')) return false;
    }
    const html = (await readIndex()) ?? NOT_BUILT_PAGE;
    // The app is never framed (clickjacking); the emails it shows are in sandboxed iframes.
    reply.code(200).header('content-type', 'text/html; charset=utf-8').header('cache-control', 'no-cache');
    reply.header('x-frame-options', 'DENY');
    reply.header('content-security-policy', DASHBOARD_CONTENT_SECURITY_POLICY);
    reply.header('x-content-type-options', 'nosniff');
    reply.header('referrer-policy', 'same-origin');
    reply.send(request.method === 'HEAD' ? undefined : html);
    return true;
  };
}
