import type { LookupAddress } from 'node:dns';
import type { Resolver } from '../../src/modules/webhooks/webhook-destination.ts';

/**
 * A webhook resolver answering from `table` (host → addresses), which the test may change between
 * calls: what a DNS server under someone else's control could say (rebinding included). Unknown
 * hosts fail with ENOTFOUND as getaddrinfo does; `asked` lists every host looked up, in order.
 */
export function fakeDns(table: Record<string, string[]>): Resolver & { asked: string[] } {
  const asked: string[] = [];
  const resolve = async (host: string): Promise<LookupAddress[]> => {
    asked.push(host);
    const addresses = table[host];
    if (!addresses) throw Object.assign(new Error(`getaddrinfo ENOTFOUND ${host}`), { code: 'ENOTFOUND' });
    return addresses.map((address) => ({ address, family: address.includes(':') ? 6 : 4 }));
  };
  return Object.assign(resolve, { asked });
}
