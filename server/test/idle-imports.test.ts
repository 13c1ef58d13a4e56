import { execFile } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { APIError } from 'better-auth/api';
import { describe, expect, it } from 'vitest';
import { isAPIError } from '../src/modules/auth/index.ts';
import { createTestDatabase } from './helpers/database.ts';

/**
 * Issue #9, idle memory: what an idle server never uses is not loaded at start. better-auth (its
 * server API and plugins), the EmailBuilder renderer with React, html-to-text and file-type are
 * imported on their first use, nodemailer when the first SMTP provider is made (each hosted API's SDK
 * when the first provider of its type is made), ioredis only with
 * REDIS_URL, puppeteer-core (and the bundled PDF renderer's server) at the first PDF or thumbnail
 * (issue #12); `npm run bench:idle-memory` measures what that saves.
 */
const runtime = fileURLToPath(new URL('../src/runtime.ts', import.meta.url));

/** Every module file a fresh Node process loads to import runtime.ts (what `postwright start` loads before it starts). */
async function filesLoadedAtStart(): Promise<string[]> {
  const script = `
    import { registerHooks } from 'node:module';
    const seen = [];
    registerHooks({ load(url, context, next) { seen.push(url); return next(url, context); } });
    await import(${JSON.stringify(runtime)});
    console.log(JSON.stringify(seen));`;
  const { stdout } = await promisify(execFile)(process.execPath, ['--input-type=module', '-e', script], {
    env: { ...process.env, NODE_ENV: 'production' },
    maxBuffer: 64 << 20,
  });
  return JSON.parse(stdout) as string[];
}

/**
 * How many times importing runtime.ts in a fresh Node process calls Intl's formatters (each loads
 * ICU's data: ≈ 5 MB of the node binary's pages plus ICU's tables on the malloc heap).
 */
async function intlCallsAtStart(): Promise<string[]> {
  const script = `
    const calls = [];
    for (const name of ['DateTimeFormat', 'NumberFormat', 'Collator', 'PluralRules', 'Segmenter']) {
      const original = Intl[name];
      Intl[name] = new Proxy(original, {
        construct(target, args) { calls.push(name); return Reflect.construct(target, args); },
        apply(target, self, args) { calls.push(name); return Reflect.apply(target, self, args); },
      });
    }
    await import(${JSON.stringify(runtime)});
    console.log(JSON.stringify(calls));`;
  const { stdout } = await promisify(execFile)(process.execPath, ['--input-type=module', '-e', script], {
    env: { ...process.env, NODE_ENV: 'production' },
    maxBuffer: 64 << 20,
  });
  return JSON.parse(stdout) as string[];
}

/** Node.js's own modules (process.moduleLoadList) a fresh process loads to import runtime.ts. */
async function builtinsLoadedAtStart(): Promise<string[]> {
  const script = `
    await import(${JSON.stringify(runtime)});
    console.log(JSON.stringify(process.moduleLoadList));`;
  const { stdout } = await promisify(execFile)(process.execPath, ['--input-type=module', '-e', script], {
    env: { ...process.env, NODE_ENV: 'production' },
    maxBuffer: 64 << 20,
  });
  return JSON.parse(stdout) as string[];
}

/**
 * Every module file (ESM and CommonJS) a fresh Node process has loaded once `startPostwright` (role
 * all: API and workers) is up on `databaseUrl`, stopped again before it reports.
 */
async function filesLoadedByRunningServer(databaseUrl: string): Promise<string[]> {
  const dataDir = mkdtempSync(path.join(tmpdir(), 'postwright-idle-imports-'));
  const script = `
    import { registerHooks } from 'node:module';
    const seen = [];
    registerHooks({ load(url, context, next) { seen.push(url); return next(url, context); } });
    const { loadConfig } = await import(${JSON.stringify(fileURLToPath(new URL('../src/config.ts', import.meta.url)))});
    const { startPostwright } = await import(${JSON.stringify(runtime)});
    const running = await startPostwright(loadConfig(), 'all');
    await running.stop();
    console.log(JSON.stringify(seen));`;
  try {
    const { stdout } = await promisify(execFile)(process.execPath, ['--input-type=module', '-e', script], {
      env: {
        ...process.env,
        NODE_ENV: 'production',
        LOG_LEVEL: 'warn',
        DATABASE_URL: databaseUrl,
        ENCRYPTION_KEY: randomBytes(32).toString('base64'),
        DATA_DIR: dataDir,
        PORT: '0',
        HOST: '127.0.0.1',
        BASE_URL: 'http://localhost:3000',
      },
      maxBuffer: 64 << 20,
    });
    return JSON.parse(stdout.slice(stdout.lastIndexOf('\n[') + 1)) as string[];
  } finally {
    rmSync(dataDir, { recursive: true, force: true });
  }
}

describe('modules loaded at start', () => {
  it("leaves out Fastify's default schema compilers (Ajv, fast-json-stringify): every route uses zod's", async () => {
    const database = await createTestDatabase();
    try {
      const files = await filesLoadedByRunningServer(database.url);
      expect(files.some((url) => url.includes('/node_modules/fastify/'))).toBe(true);
      expect(
        files.filter((url) =>
          /\/node_modules\/(ajv|ajv-formats|@fastify\/ajv-compiler|@fastify\/fast-json-stringify-compiler)\/|\/node_modules\/fast-json-stringify\/(?!lib\/(serializer|v8)\.js)/.test(
            url,
          ),
        ),
      ).toEqual([]);
    } finally {
      await database.drop();
    }
  });

  it("leaves out Node.js's bundled undici (an ESM import of node:http loads it through its WebSocket getter)", async () => {
    expect((await builtinsLoadedAtStart()).filter((name) => name.includes('undici'))).toEqual([]);
  });

  it('makes no Intl formatter (ICU data stays unloaded until a date or number is formatted)', async () => {
    expect(await intlCallsAtStart()).toEqual([]);
  });

  it('leaves out better-auth, the renderer, React, html-to-text, file-type, nodemailer, ioredis, undici, the provider SDKs and puppeteer-core', async () => {
    const files = await filesLoadedAtStart();
    expect(files.some((url) => url.includes('/server/src/runtime.ts'))).toBe(true);
    const lazy = files.filter((url) =>
      /\/node_modules\/(better-auth\/dist\/(?!integrations\/node)|@usewaypoint\/|react|react-dom\/|html-to-text\/|htmlparser2\/|file-type\/|nodemailer\/(?!(lib|dist\/esm)\/addressparser)|ioredis\/|undici\/|resend\/|@sendgrid\/|mailgun\.js\/|form-data\/|@aws-sdk\/|postmark\/|puppeteer-core\/|chromium-bidi\/|@puppeteer\/)/.test(
        url,
      ),
    );
    expect(lazy).toEqual([]);
    // rate-limiter-flexible: the memory store's own files, not its index of every store.
    expect(
      files.filter((url) => /\/rate-limiter-flexible\/(index\.js|lib\/RateLimiter(Cluster|Redis))/.test(url)),
    ).toEqual([]);
    // The bundled PDF renderer's server (Fastify app, Chromium pool) loads at its first render only.
    expect(files.filter((url) => url.includes('/server/src/modules/pdf/renderer/'))).toEqual([]);
  });

  it("isAPIError tells better-auth's API errors from others without loading better-auth", () => {
    expect(isAPIError(new APIError('BAD_REQUEST', { message: 'no' }))).toBe(true);
    expect(isAPIError(new Error('no'))).toBe(false);
    expect(isAPIError({ name: 'APIError' })).toBe(false);
    expect(isAPIError(undefined)).toBe(false);
  });
});
