import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { WebhookClient } from './webhook-client.ts';

/**
 * The webhook client's per-URL and per-deadline work (issue #11 throughput): a URL is parsed and
 * judged once, yet its rules hold on every request (an IP literal the policy refuses is refused
 * each time, https is required as soon as NODE_ENV=production); attempts starting together share
 * one deadline timer, and each still ends at its own WEBHOOK_TIMEOUT_SECONDS.
 */
describe('WebhookClient', () => {
  let server: Server;
  let base: string;
  const requests: string[] = [];
  const clients: WebhookClient[] = [];
  const nodeEnv = process.env.NODE_ENV;

  beforeAll(async () => {
    server = createServer((request, response) => {
      requests.push(request.url ?? '');
      // /hang never answers (the client's deadline ends it).
      if (request.url === '/hang') return;
      request.resume();
      // /split answers 2,047 ASCII bytes then "é" (2 bytes): the 2 KB cap falls inside the "é".
      if (request.url === '/split') {
        request.on('end', () => response.end(`${'a'.repeat(2047)}é and more`));
        return;
      }
      request.on('end', () => response.end('ok'));
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  });
  afterEach(() => {
    process.env.NODE_ENV = nodeEnv;
  });
  afterAll(async () => {
    await Promise.all(clients.map((client) => client.close()));
    server.closeAllConnections();
    await new Promise<void>((resolve) => server.close(() => resolve()));
  });
  const client = (allowPrivate: boolean, timeoutSeconds = 5) => {
    const made = new WebhookClient({ policy: { allowPrivate }, timeoutSeconds });
    clients.push(made);
    return made;
  };

  it('keeps a response body to 2 KB of whole characters (never half a multi-byte one)', async () => {
    const result = await client(true).post(`${base}/split`, {}, '{}');
    expect(result.responseBody).toBe('a'.repeat(2047));
    expect(Buffer.byteLength(result.responseBody!)).toBeLessThanOrEqual(2048);
  });

  it('parses a URL once, and still refuses a refused IP literal on every request', async () => {
    const strict = client(false);
    for (let i = 0; i < 3; i++) {
      const result = await strict.post(`${base}/refused`, {}, '{}');
      expect(result).toMatchObject({ success: false, responseStatus: null });
      expect(result.error).toMatch(/127\.0\.0\.1 is a loopback address.*WEBHOOKS_ALLOW_PRIVATE/);
    }
    const metadata = await strict.post('http://169.254.169.254/latest/meta-data/', {}, '{}');
    expect(metadata.error).toMatch(/cloud metadata address/);
    expect(requests).not.toContain('/refused');
    expect(strict.stats.targetsParsed).toBe(2);

    const allowed = client(true);
    for (let i = 0; i < 3; i++) {
      expect(await allowed.post(`${base}/ok`, {}, '{}')).toMatchObject({
        success: true,
        responseStatus: 200,
      });
    }
    expect(allowed.stats.targetsParsed).toBe(1);
  });

  it('requires https from the request on which NODE_ENV=production, for a URL already parsed', async () => {
    const allowed = client(true);
    expect(await allowed.post(`${base}/env`, {}, '{}')).toMatchObject({ success: true });
    process.env.NODE_ENV = 'production';
    const refused = await allowed.post(`${base}/env`, {}, '{}');
    expect(refused).toMatchObject({ success: false, responseStatus: null });
    expect(refused.error).toMatch(/must be an https URL/);
    expect(allowed.stats.targetsParsed).toBe(1);
  });

  it('ends attempts started together at their deadline with one timer', async () => {
    const allowed = client(true, 1);
    const started = performance.now();
    const results = await Promise.all([1, 2, 3].map(() => allowed.post(`${base}/hang`, {}, '{}')));
    const elapsed = performance.now() - started;
    for (const result of results) {
      expect(result).toMatchObject({ success: false, responseStatus: null, error: 'No answer within 1 s' });
      expect(result.durationMs).toBeGreaterThanOrEqual(1_000);
    }
    // Never before WEBHOOK_TIMEOUT_SECONDS, and at most one window (50 ms at 1 s) later plus slack.
    expect(elapsed).toBeLessThan(1_000 + 1_000);
    expect(allowed.stats.deadlineTimers).toBe(1);
  });
});
