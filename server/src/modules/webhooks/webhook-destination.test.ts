import type { LookupAddress } from 'node:dns';
import type { LookupFunction } from 'node:net';
import { describe, expect, it } from 'vitest';
import { fakeDns } from '../../../test/helpers/fake-dns.ts';
import { webhookLookup } from './webhook-destination.ts';

/** What the lookup answers for `host` (all addresses), or its error. */
function lookUp(lookup: LookupFunction, host: string): Promise<LookupAddress[] | NodeJS.ErrnoException> {
  return new Promise((resolve) => {
    lookup(host, { all: true }, (error, addresses) =>
      resolve(error ? error : (addresses as unknown as LookupAddress[])),
    );
  });
}

/**
 * The webhook agent's lookup (issue #11): a name's answer is reused for new connections for a few
 * seconds (a burst to one receiver opens many connections at once), only answers the policy
 * allowed are kept, and a refused or failed answer is asked again every time.
 */
describe('webhookLookup', () => {
  const strict = { allowPrivate: false };

  it('reuses an allowed answer within its time, then asks the resolver again', async () => {
    const table = { 'receiver.example': ['93.184.216.34'] };
    const dns = fakeDns(table);
    const lookup = webhookLookup(strict, dns, { cacheMs: 200 });
    expect(await lookUp(lookup, 'receiver.example')).toEqual([{ address: '93.184.216.34', family: 4 }]);
    expect(await lookUp(lookup, 'receiver.example')).toEqual([{ address: '93.184.216.34', family: 4 }]);
    expect(dns.asked).toEqual(['receiver.example']);
    // The name now points inside (rebinding): once the answer expired, the new one is checked.
    table['receiver.example'] = ['10.0.0.5'];
    await new Promise((resolve) => setTimeout(resolve, 250));
    const refused = await lookUp(lookup, 'receiver.example');
    expect(refused).toBeInstanceOf(Error);
    expect((refused as Error).message).toMatch(/resolves to a private-network address/);
    expect(dns.asked).toHaveLength(2);
  });

  it('keeps no refused or failed answer: each connection asks again', async () => {
    const dns = fakeDns({ 'inside.example': ['192.168.1.1'] });
    const lookup = webhookLookup(strict, dns);
    for (let i = 0; i < 2; i++) {
      expect(await lookUp(lookup, 'inside.example')).toBeInstanceOf(Error);
      expect(await lookUp(lookup, 'missing.example')).toMatchObject({ code: 'ENOTFOUND' });
    }
    expect(dns.asked).toEqual(['inside.example', 'missing.example', 'inside.example', 'missing.example']);
  });

  it('asks the resolver for every connection with cacheMs 0', async () => {
    const dns = fakeDns({ 'receiver.example': ['93.184.216.34'] });
    const lookup = webhookLookup(strict, dns, { cacheMs: 0 });
    await lookUp(lookup, 'receiver.example');
    await lookUp(lookup, 'receiver.example');
    expect(dns.asked).toHaveLength(2);
  });
});
