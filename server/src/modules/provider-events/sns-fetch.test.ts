import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { rejectionOf } from '../../../test/helpers/rejection.ts';
import { createSnsFetch, SNS_FETCH_MAX_BYTES } from './sns-fetch.ts';

/**
 * Review finding, session 22: SNS certificates and SubscribeURLs were fetched with the global
 * `fetch`, outside the outbound policy every other outbound connection obeys (CONVENTIONS.md: one
 * client with the SSRF guard). A local server stands for a host that resolves to a private address.
 */
describe('createSnsFetch (the SNS handler’s fetches)', () => {
  let server: Server;
  let port: number;
  const served: string[] = [];

  beforeAll(async () => {
    server = createServer((request, response) => {
      served.push(request.url ?? '');
      if (request.url === '/big') response.end('x'.repeat(SNS_FETCH_MAX_BYTES + 1));
      else if (request.url === '/moved') response.writeHead(302, { location: '/cert.pem' }).end();
      else response.end('certificate');
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    port = (server.address() as AddressInfo).port;
  });
  afterAll(() => new Promise<void>((resolve) => server.close(() => resolve())));

  it('refuses a host that is or resolves to a private address, without connecting', async () => {
    const sns = createSnsFetch({ policy: { allowPrivate: false } });
    const before = served.length;
    for (const host of ['127.0.0.1', 'localhost', '[::ffff:127.0.0.1]']) {
      const error = await rejectionOf(sns.fetchText(`http://${host}:${port}/cert.pem`));
      expect(error?.code, host).toBe('EOUTBOUND');
    }
    expect(served.length).toBe(before);
    await sns.close();
  });

  it("fetches the operator's PROVIDER_EVENTS_SNS_ENDPOINT origin, and private hosts when the policy allows", async () => {
    const trusted = createSnsFetch({
      policy: { allowPrivate: false },
      trustedEndpoint: `http://127.0.0.1:${port}`,
    });
    expect(await trusted.fetchText(`http://127.0.0.1:${port}/cert.pem`)).toBe('certificate');
    await trusted.close();
    const allowed = createSnsFetch({ policy: { allowPrivate: true } });
    expect(await allowed.fetchText(`http://localhost:${port}/cert.pem`)).toBe('certificate');
    await allowed.close();
  });

  it('follows no redirect and reads no more than SNS_FETCH_MAX_BYTES', async () => {
    const sns = createSnsFetch({ policy: { allowPrivate: true } });
    expect(await rejectionOf(sns.fetchText(`http://localhost:${port}/moved`))).toBeInstanceOf(Error);
    expect((await rejectionOf(sns.fetchText(`http://localhost:${port}/big`)))?.message).toContain(
      `more than ${SNS_FETCH_MAX_BYTES} bytes`,
    );
    await sns.close();
  });
});
