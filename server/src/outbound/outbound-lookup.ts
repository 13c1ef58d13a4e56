import type { LookupAddress } from 'node:dns';
import { lookup } from 'node:dns/promises';
import type { LookupFunction } from 'node:net';
import { ALLOW_PRIVATE_VARIABLE, type OutboundPolicy, refusalOf } from './address-policy.ts';

/**
 * Name resolution for outbound connections: every address a name resolves to is checked against
 * the {@link OutboundPolicy} before anything connects, and the connection is then made to those
 * checked addresses (never to the name again), so a DNS answer that changes between the check and
 * the connect (DNS rebinding) cannot slip a private address through.
 */

/** Thrown (or handed to a lookup callback) when the policy refuses a destination. */
export class OutboundRefusedError extends Error {
  /** Stable code for callers that classify errors (`err.code`), like Node's system errors. */
  readonly code = 'EOUTBOUND';
  /** `metadata` is refused always; `private` unless SMTP_ALLOW_PRIVATE is set. */
  readonly reason: 'metadata' | 'private';

  constructor(message: string, reason: 'metadata' | 'private') {
    super(message);
    this.name = 'OutboundRefusedError';
    this.reason = reason;
  }
}

/**
 * Resolves `host` (a name or an IP literal) with the system resolver (`dns.lookup`, all addresses,
 * so /etc/hosts and `localhost` count) and checks every address; one refused address refuses the
 * host, since whoever controls its DNS chooses which address a client would use.
 * @param family 4 or 6 to ask for one family only, 0 (default) for both.
 * @returns the checked addresses in resolver order, at least one.
 * @throws OutboundRefusedError (code EOUTBOUND) naming the host and the kind of address, and for a
 *   private one the variable that allows it; the resolver's own errors (ENOTFOUND, EAI_AGAIN)
 *   unchanged.
 */
export async function resolveOutbound(
  host: string,
  policy: OutboundPolicy,
  family: 0 | 4 | 6 = 0,
): Promise<LookupAddress[]> {
  const addresses = await lookup(host, { all: true, family });
  if (addresses.length === 0) {
    throw Object.assign(new Error(`No address found for ${host}`), { code: 'ENOTFOUND', hostname: host });
  }
  for (const { address } of addresses) {
    const refused = refusalOf(address, policy);
    if (!refused) continue;
    // A name's resolved address is not repeated: the message must not map internal names for whoever
    // configures an adapter.
    const subject = address === host ? `${host} is` : `${host} resolves to`;
    if (refused.kind === 'metadata') {
      throw new OutboundRefusedError(
        `Refused to connect to ${host}: ${subject} a cloud metadata address, which is never allowed`,
        'metadata',
      );
    }
    throw new OutboundRefusedError(
      `Refused to connect to ${host}: ${subject} a ${refused.range} address. ` +
        `Set ${ALLOW_PRIVATE_VARIABLE}=true to allow private destinations (e.g. an internal relay)`,
      'private',
    );
  }
  return addresses;
}

/**
 * A `lookup` for `net.connect`, `tls.connect` and undici (`new Agent({ connect: { lookup } })`)
 * that resolves through {@link resolveOutbound}: the socket connects only to checked addresses.
 * Node skips `lookup` for a host that is already an IP literal, so a caller must check a literal
 * itself ({@link resolveOutbound} accepts literals) before connecting; `connectOutbound` does.
 * Errors reach the callback: OutboundRefusedError (EOUTBOUND) or the resolver's.
 */
export function createOutboundLookup(policy: OutboundPolicy): LookupFunction {
  return (hostname, options, callback) => {
    const requested = options.family;
    const family =
      requested === 4 || requested === 'IPv4' ? 4 : requested === 6 || requested === 'IPv6' ? 6 : 0;
    resolveOutbound(hostname, policy, family).then(
      (addresses) => {
        if (options.all) return callback(null, addresses);
        const [first] = addresses as [LookupAddress];
        callback(null, first.address, first.family);
      },
      (error: NodeJS.ErrnoException) => callback(error, ''),
    );
  };
}
