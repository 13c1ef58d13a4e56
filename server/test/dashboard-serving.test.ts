import { readFileSync } from 'node:fs';
import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import Fastify, { type FastifyInstance } from 'fastify';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CLIENT_ROUTES, dashboardFallback } from '../src/http/dashboard.ts';
import { installErrorHandling } from '../src/http/error-handler.ts';
import { createTestContext, type TestContext } from './helpers/app.ts';

/**
 * Issue #13: the API process serves the dashboard at `/` with a fallback to index.html for client
 * routes, without shadowing the server's own routes (unknown /api paths stay JSON 404s).
 */
describe('dashboard serving, in the real app', () => {
  let ctx: TestContext;
  beforeAll(async () => {
    ctx = await createTestContext('postgres');
  });
  afterAll(() => ctx?.close());

  it.each([
    '/',
    '/setup?token=abc',
    '/login?error=invitation_required',
    '/invite/inv_123',
    '/logs/eml_1',
    '/templates',
  ])('answers the app (HTML) for the client route %s', async (url) => {
    const response = await ctx.app.inject({ method: 'GET', url });
    expect(response.statusCode).toBe(200);
    expect(response.headers['content-type']).toMatch(/^text\/html/);
    expect(response.body).toContain('<html');
  });

  it.each([
    '/api/nope',
    '/api/logs/x/y/z',
    '/api',
    '/t/unknown',
    '/files',
    '/docs/nope',
    '/healthz/x',
    // Paths the app does not route: a mistyped API URL, and a traversal URL parsing resolves.
    '/v1/send',
    '/files/%2E%2E/%2E%2E/etc/passwd',
  ])('keeps %s a JSON 404 in the envelope', async (url) => {
    const response = await ctx.app.inject({ method: 'GET', url });
    expect(response.statusCode).toBe(404);
    expect(response.json()).toMatchObject({ success: false, error: { code: 'NOT_FOUND' } });
  });

  it('leaves the server routes alone: /healthz, /docs/json and a session route', async () => {
    expect((await ctx.app.inject({ url: '/healthz' })).json()).toEqual({
      success: true,
      data: { status: 'ok' },
    });
    expect((await ctx.app.inject({ url: '/docs/json' })).json()).toHaveProperty('openapi');
    const me = await ctx.app.inject({ url: '/api/auth/me' });
    expect(me.statusCode).toBe(401);
    expect(me.json()).toMatchObject({ error: { code: 'UNAUTHORIZED' } });
  });

  it('lists every route of the app (web/src/App.tsx) as a client route', () => {
    const app = readFileSync(path.resolve(import.meta.dirname, '../../web/src/App.tsx'), 'utf8');
    const routes = [...app.matchAll(/<Route path="\/([^/"*]+)/g)].map((match) => match[1]);
    expect(routes.length).toBeGreaterThan(5);
    for (const route of routes) expect(CLIENT_ROUTES.has(route!), route).toBe(true);
  });

  it('keeps the router error for a path parameter over its limit (no wildcard catches it)', async () => {
    const response = await ctx.app.inject({ url: `/api/templates/${'a'.repeat(101)}` });
    expect(response.statusCode).toBe(400);
    expect(response.json()).toMatchObject({ error: { code: 'INVALID_INPUT' } });
  });

  it('answers a POST to a client path with the JSON 404, not the app', async () => {
    const response = await ctx.app.inject({ method: 'POST', url: '/login' });
    expect(response.statusCode).toBe(404);
    expect(response.json()).toMatchObject({ error: { code: 'NOT_FOUND' } });
  });
});

describe('dashboard serving of built files', () => {
  const warnings: string[] = [];
  let dist: string;
  let app: FastifyInstance;
  beforeAll(async () => {
    dist = await mkdtemp(path.join(tmpdir(), 'dashboard-dist-'));
    await mkdir(path.join(dist, 'assets'));
    await writeFile(path.join(dist, 'index.html'), '<!doctype html><html><body>app</body></html>');
    await writeFile(path.join(dist, 'assets', 'index-abc123.js'), 'console.log(1)');
    await writeFile(path.join(dist, 'favicon.svg'), '<svg/>');
    await writeFile(path.join(path.dirname(dist), 'secret.txt'), 'outside');
    // Warnings (a reply sent twice) land in `warnings`.
    app = Fastify({ logger: { level: 'warn', stream: { write: (line: string) => warnings.push(line) } } });
    installErrorHandling(app, { fallback: dashboardFallback({ dist }) });
  });
  afterAll(async () => {
    await app?.close();
    await rm(dist, { recursive: true, force: true });
  });

  it('serves hashed assets with a long cache and their type', async () => {
    const response = await app.inject({ url: '/assets/index-abc123.js' });
    expect(response.statusCode).toBe(200);
    expect(response.body).toBe('console.log(1)');
    expect(response.headers['content-type']).toMatch(/^text\/javascript/);
    expect(response.headers['cache-control']).toContain('immutable');
  });

  it('serves other files of the build, revalidated', async () => {
    const response = await app.inject({ url: '/favicon.svg' });
    expect(response.headers['content-type']).toBe('image/svg+xml');
    expect(response.headers['cache-control']).toBe('no-cache');
  });

  it('answers index.html, never framed, for client routes', async () => {
    const response = await app.inject({ url: '/adapters' });
    expect(response.body).toContain('app');
    expect(response.headers['x-frame-options']).toBe('DENY');
    // Review finding, session 14: no policy at all, so an injection would run with the session.
    const directives = String(response.headers['content-security-policy']).split('; ');
    expect(directives).toEqual(
      expect.arrayContaining([
        "default-src 'self'",
        "script-src 'self'",
        "connect-src 'self'",
        "object-src 'none'",
        "base-uri 'none'",
        "frame-ancestors 'none'",
      ]),
    );
    expect(response.headers['x-content-type-options']).toBe('nosniff');
  });

  it('answers a JSON 404 for a missing file, and never a file outside the build', async () => {
    for (const url of [
      '/assets/missing.js',
      '/../secret.txt',
      '/%2e%2e/secret.txt',
      '/assets/%2e%2e/%2e%2e/secret.txt',
      '/%2e%2e%2fsecret.txt',
      '/..%5csecret.txt',
    ]) {
      const response = await app.inject({ url });
      expect(response.body, url).not.toContain('outside');
      if (response.statusCode !== 200)
        expect(response.json(), url).toMatchObject({ error: { code: 'NOT_FOUND' } });
    }
    expect((await app.inject({ url: '/assets/missing.js' })).statusCode).toBe(404);
  });

  it('answers each request once (no "reply already sent" from the 404 behind it)', async () => {
    for (const url of ['/', '/adapters', '/assets/index-abc123.js', '/assets/missing.js']) {
      await app.inject({ url });
      await app.inject({ method: 'HEAD', url });
    }
    expect(warnings).toEqual([]);
  });

  it('serves a "not built" page when the build is missing', async () => {
    const bare = Fastify();
    installErrorHandling(bare, { fallback: dashboardFallback({ dist: path.join(dist, 'nothing-here') }) });
    const response = await bare.inject({ url: '/' });
    expect(response.statusCode).toBe(200);
    expect(response.body).toContain('npm run build:web');
    await bare.close();
  });
});
