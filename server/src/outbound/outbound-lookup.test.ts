import { createServer, get, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createOutboundLookup, OutboundRefusedError, resolveOutbound } from './outbound-lookup.ts';

const deny = { allowPrivate: false };
const allow = { allowPrivate: true };

async function refusal(promise: Promise<unknown>): Promise<OutboundRefusedError> {
  const error = await promise.then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(error).toBeInstanceOf(OutboundRefusedError);
  return error as OutboundRefusedError;
}

describe('resolveOutbound', () => {
  it('refuses a name that resolves to loopback, naming the variable but not the address', async () => {
    const error = await refusal(resolveOutbound('localhost', deny));
    expect(error.code).toBe('EOUTBOUND');
    expect(error.reason).toBe('private');
    expect(error.message).toBe(
      'Refused to connect to localhost: localhost resolves to a loopback address. ' +
        'Set SMTP_ALLOW_PRIVATE=true to allow private destinations (e.g. an internal relay)',
    );
  });

  it('refuses private literals of both families', async () => {
    expect((await refusal(resolveOutbound('10.0.0.8', deny))).message).toContain(
      '10.0.0.8 is a private-network address',
    );
    expect((await refusal(resolveOutbound('::ffff:7f00:1', deny))).message).toContain(
      'SMTP_ALLOW_PRIVATE=true',
    );
    expect((await refusal(resolveOutbound('fe80::1', deny))).message).toContain('link-local');
  });

  it('refuses metadata endpoints even when private addresses are allowed, without offering the variable', async () => {
    const error = await refusal(resolveOutbound('169.254.169.254', allow));
    expect(error.reason).toBe('metadata');
    expect(error.message).toBe(
      'Refused to connect to 169.254.169.254: 169.254.169.254 is a cloud metadata address, which is never allowed',
    );
  });

  it('returns the checked addresses when the policy allows them', async () => {
    const addresses = await resolveOutbound('localhost', allow);
    expect(addresses.length).toBeGreaterThan(0);
    for (const { address } of addresses) expect(['127.0.0.1', '::1']).toContain(address);
  });

  it("passes the resolver's own error through for a name that does not exist (RFC 2606 .invalid)", async () => {
    const error = await resolveOutbound('no-such-host.invalid', allow).then(
      () => undefined,
      (e: NodeJS.ErrnoException) => e,
    );
    expect(error?.code).toMatch(/^(ENOTFOUND|EAI_AGAIN)$/);
  });
});

describe('createOutboundLookup (for net/tls/http/undici `lookup`)', () => {
  let server: Server;
  let port: number;
  let requests = 0;

  beforeAll(async () => {
    server = createServer((_request, response) => {
      requests += 1;
      response.end('ok');
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    port = (server.address() as AddressInfo).port;
  });
  afterAll(() => new Promise<void>((resolve) => server.close(() => resolve())));

  /**
   * GET http://localhost:<port>/ through Node's HTTP client with the given lookup, on a new
   * connection (`agent: false`): the global agent's keep-alive socket from another case would
   * skip the lookup under test.
   */
  function fetchLocalhost(lookup: ReturnType<typeof createOutboundLookup>) {
    return new Promise<{ status?: number; error?: NodeJS.ErrnoException }>((resolve) => {
      const request = get(
        { host: 'localhost', port, path: '/', lookup, family: 4, agent: false },
        (response) => {
          response.resume();
          response.on('end', () => resolve({ status: response.statusCode ?? 0 }));
        },
      );
      request.on('error', (error: NodeJS.ErrnoException) => resolve({ error }));
    });
  }

  it('makes an HTTP client refuse a name resolving to loopback before any connection', async () => {
    const before = requests;
    const { error } = await fetchLocalhost(createOutboundLookup(deny));
    expect(error).toBeInstanceOf(OutboundRefusedError);
    expect(error?.code).toBe('EOUTBOUND');
    expect(requests).toBe(before);
  });

  it('lets the same client through when the policy allows private addresses', async () => {
    expect(await fetchLocalhost(createOutboundLookup(allow))).toEqual({ status: 200 });
  });

  it('answers single-address and all-address lookups like dns.lookup', async () => {
    const lookup = createOutboundLookup(allow);
    const single = await new Promise<unknown[]>((resolve) =>
      lookup('127.0.0.1', {}, (...args) => resolve(args)),
    );
    expect(single).toEqual([null, '127.0.0.1', 4]);
    const all = await new Promise<unknown[]>((resolve) =>
      lookup('127.0.0.1', { all: true }, (...args) => resolve(args)),
    );
    expect(all).toEqual([null, [{ address: '127.0.0.1', family: 4 }]]);
  });
});
