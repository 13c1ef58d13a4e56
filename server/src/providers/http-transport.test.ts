import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { classifyHttpFailure, sendUnderSignal } from './http-transport.ts';
import { createProvider } from './registry.ts';
import { ProviderError } from './types.ts';

/** The HTTP providers' shared rules: error classification and giving up a send on its signal. */

describe('classifyHttpFailure', () => {
  it.each([
    [undefined, false],
    [429, false],
    [500, false],
    [503, false],
    [400, true],
    [401, true],
    [403, true],
    [404, true],
    [422, true],
  ])('status %s → permanent %s, with the provider message', (status, permanent) => {
    const error = classifyHttpFailure({ status, message: 'provider says no', code: 'some_code' });
    expect(error).toMatchObject({ permanent, message: 'provider says no', providerCode: 'some_code' });
  });

  it('an address refused by the outbound policy (EOUTBOUND in the cause chain) is permanent', () => {
    const refused = Object.assign(new Error('127.0.0.1 is a private address'), { code: 'EOUTBOUND' });
    const error = classifyHttpFailure({
      message: 'fetch failed',
      cause: new Error('fetch failed', { cause: refused }),
    });
    expect(error).toMatchObject({ permanent: true, providerCode: 'EOUTBOUND', message: refused.message });
  });
});

describe('sendUnderSignal', () => {
  it('does not start a send whose signal already aborted (transient, not ambiguous)', async () => {
    let started = false;
    const error = await sendUnderSignal(
      'Test',
      AbortSignal.abort(new Error('deadline')),
      async () => {
        started = true;
      },
      () => new ProviderError('x', { permanent: true }),
    ).catch((e: unknown) => e);
    expect(started).toBe(false);
    expect(error).toMatchObject({ permanent: false, ambiguous: false, providerCode: 'EABORT' });
  });

  it('a send given up while its request is under way is ambiguous (it may have been delivered)', async () => {
    const controller = new AbortController();
    const pending = sendUnderSignal(
      'Test',
      controller.signal,
      () => new Promise<never>(() => {}),
      () => new ProviderError('x', { permanent: true }),
    ).catch((e: unknown) => e);
    controller.abort(new Error('no answer within the 60 s send deadline'));
    const error = (await pending) as ProviderError;
    expect(error).toMatchObject({ permanent: false, ambiguous: true });
    expect(error.message).toContain('no answer within the 60 s send deadline');
  });
});

describe('hosted-API provider under the worker deadline', () => {
  let silent: Server;
  let url: string;
  beforeAll(async () => {
    // Accepts the request and never answers: the provider may have the email.
    silent = createServer(() => {});
    await new Promise<void>((resolve) => silent.listen(0, '127.0.0.1', resolve));
    url = `http://127.0.0.1:${(silent.address() as AddressInfo).port}`;
  });
  afterAll(
    () =>
      new Promise<void>((resolve) => {
        silent.closeAllConnections();
        silent.close(() => resolve());
      }),
  );

  it('gives up at the deadline with an ambiguous error instead of waiting', async () => {
    const provider = createProvider(
      'mailapi_server',
      { serverToken: 't' },
      { endpoints: { PROVIDER_ENDPOINT_POSTMARK: url } },
    );
    try {
      const error = await provider
        .send(
          { from: 'a@example.test', to: ['b@example.test'], subject: 's', html: '<p>h</p>', text: 'h' },
          { signal: AbortSignal.timeout(200) },
        )
        .catch((e: unknown) => e);
      expect(error).toMatchObject({ ambiguous: true, permanent: false });
    } finally {
      await provider.close();
    }
  });
});

describe('classifyHttpFailure messages (review finding, session 16)', () => {
  it("keeps a provider's message to 1,000 characters", () => {
    const error = classifyHttpFailure({ status: 400, message: 'x'.repeat(5000) });
    expect(error.message).toHaveLength(1000);
    expect(error.message.endsWith('…')).toBe(true);
    expect(error.permanent).toBe(true);
  });

  it('names the status when the body was not the provider’s error', () => {
    expect(classifyHttpFailure({ status: 413, message: '<html>too large</html>' }).message).toBe(
      'HTTP 413 Payload Too Large',
    );
    expect(classifyHttpFailure({ status: 503, message: 'Service Unavailable' }).message).toBe(
      'HTTP 503 Service Unavailable',
    );
    expect(classifyHttpFailure({ status: 422, message: 'Invalid metadata' }).message).toBe(
      'Invalid metadata',
    );
  });
});
