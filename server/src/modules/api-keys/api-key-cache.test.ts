import { describe, expect, it } from 'vitest';
import { createApiKeyCache } from './api-key-cache.ts';
import type { ApiKeyRow } from './api-keys.repository.ts';

const row = (id: string) => ({ id }) as ApiKeyRow;

/** A load that counts its calls and resolves when told. */
function controlledLoad(result: ApiKeyRow | undefined) {
  let calls = 0;
  let release: () => void = () => {};
  const load = () => {
    calls++;
    return new Promise<ApiKeyRow | undefined>((resolve) => {
      release = () => resolve(result);
    });
  };
  return { load, calls: () => calls, release: () => release() };
}

describe('API key cache', () => {
  it('loads once, then serves from memory until evicted by id', async () => {
    const cache = createApiKeyCache();
    let loads = 0;
    const load = async () => {
      loads++;
      return row('key_a');
    };
    expect(await cache.get('hash-a', load)).toEqual({ id: 'key_a' });
    expect(await cache.get('hash-a', load)).toEqual({ id: 'key_a' });
    expect(loads).toBe(1);
    cache.evict('key_a');
    await cache.get('hash-a', load);
    expect(loads).toBe(2);
  });

  it('does not keep unknown secrets', async () => {
    const cache = createApiKeyCache();
    let loads = 0;
    const load = async () => {
      loads++;
      return undefined;
    };
    await cache.get('hash-x', load);
    await cache.get('hash-x', load);
    expect(loads).toBe(2);
  });

  it('does not keep a row whose read started before an eviction', async () => {
    const cache = createApiKeyCache();
    const stale = controlledLoad(row('key_b'));
    const pending = cache.get('hash-b', stale.load);
    cache.evict('key_b'); // this process changed the key while the read was in flight
    stale.release();
    expect(await pending).toEqual({ id: 'key_b' });
    const fresh = controlledLoad(row('key_b'));
    const again = cache.get('hash-b', fresh.load);
    fresh.release();
    await again;
    expect(fresh.calls()).toBe(1);
  });

  it('shares a read with requests that came while it ran, but not with those after an eviction', async () => {
    const cache = createApiKeyCache();
    const read = controlledLoad(row('key_c'));
    const first = cache.get('hash-c', read.load);
    const joined = cache.get('hash-c', async () => row('not-read'));
    // This process deleted the key meanwhile: a request after that reads for itself (review
    // finding, session 18: it shared the earlier read and got the deleted key back).
    cache.evict('key_c');
    const after = cache.get('hash-c', async () => undefined);
    read.release();
    expect(await first).toEqual({ id: 'key_c' });
    expect(await joined).toEqual({ id: 'key_c' });
    expect(await after).toBeUndefined();
    expect(read.calls()).toBe(1);
  });

  it('forgets a row after the TTL and holds at most maxKeys rows', async () => {
    const cache = createApiKeyCache({ ttlMs: 50, maxKeys: 2 });
    let loads = 0;
    const load = (id: string) => async () => {
      loads++;
      return row(id);
    };
    await cache.get('h1', load('k1'));
    await new Promise((resolve) => setTimeout(resolve, 80));
    await cache.get('h1', load('k1'));
    expect(loads).toBe(2);

    await cache.get('h2', load('k2'));
    await cache.get('h3', load('k3')); // drops h1, the least recently used
    await cache.get('h3', load('k3'));
    await cache.get('h2', load('k2'));
    expect(loads).toBe(4);
    await cache.get('h1', load('k1'));
    expect(loads).toBe(5);
  });
});
