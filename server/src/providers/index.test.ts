import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestSmtpServer, type TestSmtpServer } from '../../test/helpers/smtp-server.ts';
import { createProvider, ProviderCache } from './index.ts';
import type { AdapterType } from './registry.ts';
import { type OutgoingEmail, ProviderError } from './types.ts';

const anEmail: OutgoingEmail = {
  from: 'a@example.com',
  to: ['b@example.com'],
  subject: 's',
  html: 'h',
  text: 't',
};

/** What a replaced or closed cached provider's send rejects with (and nothing else does). */
const CLOSED = 'Provider closed: its adapter changed';

function thrown(fn: () => unknown): ProviderError {
  try {
    fn();
  } catch (error) {
    expect(error).toBeInstanceOf(ProviderError);
    return error as ProviderError;
  }
  throw new Error('expected a ProviderError');
}

let smtp: TestSmtpServer;
let smtpConfig: { host: string; port: number };
/** The test server listens on 127.0.0.1, which the default outbound policy refuses. */
const LOCAL = { outbound: { allowPrivate: true } };

beforeAll(async () => {
  smtp = await startTestSmtpServer();
  smtpConfig = { host: '127.0.0.1', port: smtp.port };
});
afterAll(() => smtp?.close());

describe('createProvider', () => {
  it.each([
    ['mailapi_a', { apiKey: 'k' }],
    ['mailapi_b', { apiKey: 'k' }],
    ['mailapi_domain', { apiKey: 'k', domain: 'mg.example.com' }],
    ['mailapi_cloud', { accessKeyId: 'AKID', secretAccessKey: 's', region: 'eu-west-1' }],
    ['mailapi_server', { serverToken: 't' }],
  ] as const)('builds a %s provider from a valid config', async (type, config) => {
    const provider = createProvider(type, config);
    expect(typeof provider.send).toBe('function');
    await provider.close();
  });

  it('refuses a hosted-API config with a missing field permanently, naming it (ECONFIG)', () => {
    const error = thrown(() => createProvider('mailapi_domain', { apiKey: 'k' }));
    expect(error.permanent).toBe(true);
    expect(error.providerCode).toBe('ECONFIG');
    expect(error.message).toBe('Invalid mailapi_domain adapter config: config.domain');
  });

  it('refuses an unknown type and an invalid smtp config permanently', () => {
    expect(thrown(() => createProvider('carrier_pigeon' as AdapterType, {})).permanent).toBe(true);
    const invalid = thrown(() => createProvider('smtp', { host: 'smtp.example.com', port: 70000 }));
    expect(invalid.permanent).toBe(true);
    expect(invalid.message).toContain('port');
  });

  it('creates an smtp provider that delivers to the configured server', async () => {
    const provider = createProvider('smtp', smtpConfig, LOCAL);
    const result = await provider.send({ ...anEmail, to: ['created@example.com'], subject: 'Created' });
    expect(result.providerMessageId).toEqual(expect.any(String));
    // The server records a message before it answers the DATA command that `send` waits for.
    const message = smtp.messages.find((m) => m.envelopeTo.includes('created@example.com'));
    expect(message?.parsed.subject).toBe('Created');
    await provider.close();
  });

  it('opens at most maxConnections connections, however many sends wait', async () => {
    // A server of its own, so connections of other cases' pools (closing or not) do not count.
    let open = 0;
    let peakConnections = 0;
    const own = await startTestSmtpServer({
      onConnect(_session, callback) {
        open += 1;
        peakConnections = Math.max(peakConnections, open);
        callback();
      },
      onClose() {
        open -= 1;
      },
    });
    try {
      const provider = createProvider(
        'smtp',
        { host: '127.0.0.1', port: own.port },
        { ...LOCAL, maxConnections: 2 },
      );
      const sends = Array.from({ length: 12 }, (_, i) =>
        provider.send({ ...anEmail, to: [`pool${i}@example.com`] }),
      );
      await Promise.all(sends);
      expect(own.messages).toHaveLength(12);
      expect(peakConnections).toBeGreaterThanOrEqual(1);
      expect(peakConnections).toBeLessThanOrEqual(2);
      await provider.close();
    } finally {
      await own.close();
    }
  });
});

describe('ProviderCache', () => {
  it('returns the same provider for the same key and a new one for a new key', async () => {
    const cache = new ProviderCache();
    const first = cache.get('adp_1:v1', 'smtp', smtpConfig, '', LOCAL);
    expect(cache.get('adp_1:v1', 'smtp', smtpConfig, '', LOCAL)).toBe(first);
    expect(cache.get('adp_1:v2', 'smtp', smtpConfig, '', LOCAL)).not.toBe(first);
    expect(cache.size).toBe(2);
    await cache.closeAll();
  });

  it('closes the least recently used provider beyond its capacity', async () => {
    const cache = new ProviderCache(2);
    const a = cache.get('a', 'smtp', smtpConfig, '', LOCAL);
    const b = cache.get('b', 'smtp', smtpConfig, '', LOCAL);
    cache.get('a', 'smtp', smtpConfig, '', LOCAL); // a is now more recent than b
    cache.get('c', 'smtp', smtpConfig, '', LOCAL);
    expect(cache.size).toBe(2);
    expect(cache.get('a', 'smtp', smtpConfig, '', LOCAL)).toBe(a);
    await expect(a.send(anEmail)).resolves.toMatchObject({ providerMessageId: expect.any(String) });
    expect(cache.get('b', 'smtp', smtpConfig, '', LOCAL)).not.toBe(b); // b was closed and is made again
    await cache.closeAll();
  });

  it('sends through a new provider for a caller holding one evicted for space (was "Provider closed")', async () => {
    // Review finding, session 18: an email that took its provider, then waited for a connection
    // slot while emails of more than `max` other adapters went out, failed.
    const cache = new ProviderCache(2);
    let created = 0;
    const create = () => {
      created += 1;
      return createProvider('smtp', smtpConfig, LOCAL);
    };
    const held = cache.getOrCreate('a', 'v1', create);
    cache.getOrCreate('b', 'v1', create);
    cache.getOrCreate('c', 'v1', create); // evicts a
    expect(created).toBe(3);
    const result = await held.send({ ...anEmail, to: ['evicted@example.com'] });
    expect(result.providerMessageId).toEqual(expect.any(String));
    expect(smtp.messages.some((m) => m.envelopeTo.includes('evicted@example.com'))).toBe(true);
    // Through a provider made again for a, now cached: the next caller gets that one.
    expect(created).toBe(4);
    const successor = cache.getOrCreate('a', 'v1', create);
    expect(created).toBe(4);
    expect(successor).not.toBe(held);
    await expect(held.send(anEmail)).resolves.toMatchObject({ providerMessageId: expect.any(String) });
    expect(created).toBe(4);
    await cache.closeAll();
  });

  it('refuses a send through an evicted provider whose adapter changed since, and after closeAll', async () => {
    const cache = new ProviderCache(1);
    const create = () => createProvider('smtp', smtpConfig, LOCAL);
    const held = cache.getOrCreate('a', 'v1', create);
    cache.getOrCreate('b', 'v1', create); // evicts a
    cache.getOrCreate('a', 'v2', create); // a changed (evicts b)
    await expect(held.send(anEmail)).rejects.toThrow(CLOSED);
    const evicted = cache.getOrCreate('c', 'v1', create); // evicts a v2
    cache.getOrCreate('d', 'v1', create); // evicts c
    await cache.closeAll();
    await expect(evicted.send(anEmail)).rejects.toThrow(CLOSED);
    expect(cache.size).toBe(0);
  });

  it('closeAll closes and forgets every provider', async () => {
    const cache = new ProviderCache();
    const provider = cache.get('a', 'smtp', smtpConfig, '', LOCAL);
    await cache.closeAll();
    expect(cache.size).toBe(0);
    await expect(provider.send(anEmail)).rejects.toThrow(CLOSED);
    expect(cache.get('a', 'smtp', smtpConfig, '', LOCAL)).not.toBe(provider);
    await cache.closeAll();
  });

  it('caches nothing when the provider cannot be created', () => {
    const cache = new ProviderCache();
    expect(() => cache.get('x', 'mailapi_a', { apiKey: '' })).toThrow(ProviderError);
    expect(cache.size).toBe(0);
  });

  it('runs create only on a miss (the adapter config is decrypted once per version)', async () => {
    const cache = new ProviderCache();
    let created = 0;
    const create = () => {
      created += 1;
      return createProvider('smtp', smtpConfig, LOCAL);
    };
    const first = cache.getOrCreate('adp_1', 'v1', create);
    expect(cache.getOrCreate('adp_1', 'v1', create)).toBe(first);
    expect(created).toBe(1);
    cache.getOrCreate('adp_1', 'v2', create);
    expect(created).toBe(2);
    await cache.closeAll();
  });
});

describe('ProviderCache versions', () => {
  it('replaces and closes the provider of a key when its version changes', async () => {
    const cache = new ProviderCache();
    const first = cache.get('adp_1', 'smtp', smtpConfig, 'v1', LOCAL);
    expect(cache.get('adp_1', 'smtp', smtpConfig, 'v1', LOCAL)).toBe(first);
    const second = cache.get('adp_1', 'smtp', smtpConfig, 'v2', LOCAL);
    expect(second).not.toBe(first);
    expect(cache.size).toBe(1);
    // The server is up and accepts mail, so only a closed pool refuses this send.
    await expect(first.send(anEmail)).rejects.toThrow(CLOSED);
    await expect(second.send(anEmail)).resolves.toMatchObject({ providerMessageId: expect.any(String) });
    await cache.closeAll();
  });

  it('closes the old version even when the new config is invalid', async () => {
    const cache = new ProviderCache();
    const first = cache.get('adp_1', 'smtp', smtpConfig, 'v1', LOCAL);
    expect(() => cache.get('adp_1', 'smtp', { host: 'x', port: 70000 }, 'v2')).toThrow(ProviderError);
    expect(cache.size).toBe(0);
    await expect(first.send(anEmail)).rejects.toThrow(CLOSED);
  });
});

describe('ProviderCache draining', () => {
  /** A provider whose sends wait for `release()`, recording when it was closed. */
  function heldProvider() {
    const state = { closed: false, sends: 0, release: () => {} };
    const held = new Promise<void>((resolve) => {
      state.release = resolve;
    });
    const provider = {
      async send() {
        state.sends += 1;
        await held;
        return { providerMessageId: `id-${state.sends}` };
      },
      async verify() {
        return { success: true, message: 'ok' };
      },
      async close() {
        state.closed = true;
      },
    };
    return { provider, state };
  }

  it('lets a replaced provider finish its sends in flight before closing it, and refuses it new ones', async () => {
    // Review finding, session 15: renaming an adapter closed its provider at once, which cut a
    // request the provider was still answering; the send was retried and delivered twice.
    const cache = new ProviderCache();
    const old = heldProvider();
    const first = cache.getOrCreate('adp_1', 'v1', () => old.provider);
    const inFlight = first.send(anEmail);
    const next = heldProvider();
    cache.getOrCreate('adp_1', 'v2', () => next.provider);
    await new Promise((resolve) => setTimeout(resolve, 20));
    expect(old.state.closed).toBe(false);
    const refused = await first.send(anEmail).then(
      () => undefined,
      (error: unknown) => error,
    );
    expect(refused).toBeInstanceOf(ProviderError);
    expect(refused).toMatchObject({ permanent: false });
    expect(old.state.sends).toBe(1);
    old.state.release();
    await expect(inFlight).resolves.toEqual({ providerMessageId: 'id-1' });
    await new Promise((resolve) => setTimeout(resolve, 0));
    expect(old.state.closed).toBe(true);
    next.state.release();
    await cache.closeAll();
    expect(next.state.closed).toBe(true);
  });

  it('closes a replaced provider after drainMs whatever is in flight, and at once on closeAll', async () => {
    const cache = new ProviderCache(10, 50);
    const stuck = heldProvider();
    void cache.getOrCreate('adp_1', 'v1', () => stuck.provider).send(anEmail);
    cache.getOrCreate('adp_1', 'v2', () => heldProvider().provider);
    expect(stuck.state.closed).toBe(false);
    await new Promise((resolve) => setTimeout(resolve, 120));
    expect(stuck.state.closed).toBe(true);

    const draining = heldProvider();
    void cache.getOrCreate('adp_2', 'v1', () => draining.provider).send(anEmail);
    cache.getOrCreate('adp_2', 'v2', () => heldProvider().provider);
    const slow = new ProviderCache(10, 60_000);
    const held = heldProvider();
    void slow.getOrCreate('adp_3', 'v1', () => held.provider).send(anEmail);
    const started = performance.now();
    await slow.closeAll();
    expect(held.state.closed).toBe(true);
    expect(performance.now() - started).toBeLessThan(1_000);
    await cache.closeAll();
    expect(draining.state.closed).toBe(true);
  });
});
