import { describe, expect, it } from 'vitest';
import { closedPort } from '../../test/helpers/smtp-server.ts';
import type { AdapterType } from '../modules/adapters/adapter-types.ts';
import { createProvider, ProviderCache } from './index.ts';
import { type OutgoingEmail, ProviderError } from './types.ts';

/** Nothing here connects; a port nothing listens on keeps it so if that changes. */
const smtpConfig = { host: '127.0.0.1', port: await closedPort() };
const anEmail: OutgoingEmail = {
  from: 'a@example.com',
  to: ['b@example.com'],
  subject: 's',
  html: 'h',
  text: 't',
};

function thrown(fn: () => unknown): ProviderError {
  try {
    fn();
  } catch (error) {
    expect(error).toBeInstanceOf(ProviderError);
    return error as ProviderError;
  }
  throw new Error('expected a ProviderError');
}

describe('createProvider', () => {
  it.each(['mailapi_a', 'mailapi_b', 'mailapi_domain', 'mailapi_cloud', 'mailapi_server'] as const)(
    'refuses %s permanently until it is implemented',
    (type) => {
      const error = thrown(() => createProvider(type, { apiKey: 'k' }));
      expect(error.permanent).toBe(true);
      expect(error.message).toBe(`Adapter type ${type} is not supported yet`);
    },
  );

  it('refuses an unknown type and an invalid smtp config permanently', () => {
    expect(thrown(() => createProvider('carrier_pigeon' as AdapterType, {})).permanent).toBe(true);
    const invalid = thrown(() => createProvider('smtp', { host: 'smtp.example.com', port: 70000 }));
    expect(invalid.permanent).toBe(true);
    expect(invalid.message).toContain('port');
  });

  it('creates an smtp provider for a valid config', async () => {
    const provider = createProvider('smtp', smtpConfig);
    expect(typeof provider.send).toBe('function');
    await provider.close();
  });
});

describe('ProviderCache', () => {
  it('returns the same provider for the same key and a new one for a new key', async () => {
    const cache = new ProviderCache();
    const first = cache.get('adp_1:v1', 'smtp', smtpConfig);
    expect(cache.get('adp_1:v1', 'smtp', smtpConfig)).toBe(first);
    expect(cache.get('adp_1:v2', 'smtp', smtpConfig)).not.toBe(first);
    expect(cache.size).toBe(2);
    await cache.closeAll();
  });

  it('closes the least recently used provider beyond its capacity', async () => {
    const cache = new ProviderCache(2);
    const a = cache.get('a', 'smtp', smtpConfig);
    const b = cache.get('b', 'smtp', smtpConfig);
    cache.get('a', 'smtp', smtpConfig); // a is now more recent than b
    cache.get('c', 'smtp', smtpConfig);
    expect(cache.size).toBe(2);
    expect(cache.get('a', 'smtp', smtpConfig)).toBe(a);
    await expect(b.send(anEmail)).rejects.toThrow('closed');
    await cache.closeAll();
  });

  it('closeAll closes and forgets every provider', async () => {
    const cache = new ProviderCache();
    const provider = cache.get('a', 'smtp', smtpConfig);
    await cache.closeAll();
    expect(cache.size).toBe(0);
    await expect(provider.send(anEmail)).rejects.toThrow('closed');
    expect(cache.get('a', 'smtp', smtpConfig)).not.toBe(provider);
    await cache.closeAll();
  });

  it('caches nothing when the provider cannot be created', () => {
    const cache = new ProviderCache();
    expect(() => cache.get('x', 'mailapi_a', { apiKey: 'k' })).toThrow(ProviderError);
    expect(cache.size).toBe(0);
  });
});

describe('ProviderCache versions', () => {
  it('replaces and closes the provider of a key when its version changes', async () => {
    const cache = new ProviderCache();
    const config = smtpConfig;
    const first = cache.get('adp_1', 'smtp', config, 'v1');
    expect(cache.get('adp_1', 'smtp', config, 'v1')).toBe(first);
    const second = cache.get('adp_1', 'smtp', config, 'v2');
    expect(second).not.toBe(first);
    expect(cache.size).toBe(1);
    // A closed provider refuses to send (transient error), proving the old pool was closed.
    await expect(
      first.send({ from: 'a@b.co', to: ['c@d.co'], subject: 's', html: 'h', text: 't' }),
    ).rejects.toThrow();
    await cache.closeAll();
  });
});
