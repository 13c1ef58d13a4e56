import type { LookupAddress } from 'node:dns';
import { lookup } from 'node:dns/promises';
import { isIP, type LookupFunction } from 'node:net';
import { isHostOrAddress } from '../../host-name.ts';
import { type OutboundPolicy, refusalOf } from '../../outbound/index.ts';

/**
 * The SSRF guard of webhook requests (issue #11): the address every request connects to (not only
 * the name checked when the webhook was saved) must be public, unless WEBHOOKS_ALLOW_PRIVATE=true
 * lets it be loopback, private, link-local or CGNAT; cloud metadata addresses never. The rule is
 * outbound/address-policy.ts's (shared with SMTP adapters); the resolver is injectable so tests can
 * give a name any address.
 */

/** Resolves a host name to all its addresses (default: the system resolver, `dns.lookup`). */
export type Resolver = (host: string, family: 0 | 4 | 6) => Promise<LookupAddress[]>;

const systemResolver: Resolver = (host, family) => lookup(host, { all: true, family });

/** The variable that lifts the private-address refusal for webhooks (named in refusals). */
export const WEBHOOKS_ALLOW_PRIVATE_VARIABLE = 'WEBHOOKS_ALLOW_PRIVATE';

/** A webhook destination the policy refuses; `code` EOUTBOUND like Node's system errors. */
export class WebhookDestinationRefusedError extends Error {
  readonly code = 'EOUTBOUND';
}

/**
 * Throws when the policy refuses one of `addresses` of `host` (one refused address refuses the
 * host: whoever controls its DNS picks the address a client uses).
 * @throws WebhookDestinationRefusedError naming the host and kind of address (not the address a
 *   name resolved to).
 */
export function checkWebhookAddresses(
  host: string,
  addresses: readonly LookupAddress[],
  policy: OutboundPolicy,
): void {
  const literal = isIP(host) !== 0;
  for (const { address } of addresses) {
    const refused = refusalOf(address, policy);
    if (!refused) continue;
    const subject = literal ? `${host} is` : `${host} resolves to`;
    if (refused.kind === 'metadata') {
      throw new WebhookDestinationRefusedError(
        `Refused to deliver to ${host}: ${subject} a cloud metadata address, which is never allowed`,
      );
    }
    throw new WebhookDestinationRefusedError(
      `Refused to deliver to ${host}: ${subject} a ${refused.range} address. ` +
        `Set ${WEBHOOKS_ALLOW_PRIVATE_VARIABLE}=true to allow private receivers`,
    );
  }
}

/**
 * Resolves `host` (a name or an IP literal, IPv6 without brackets) and checks every address
 * ({@link checkWebhookAddresses}).
 * @returns the checked addresses, at least one.
 * @throws WebhookDestinationRefusedError; the resolver's errors (ENOTFOUND, …) unchanged.
 */
export async function resolveWebhookHost(
  host: string,
  policy: OutboundPolicy,
  resolve: Resolver = systemResolver,
  family: 0 | 4 | 6 = 0,
): Promise<LookupAddress[]> {
  const literal = isIP(host);
  const addresses = literal ? [{ address: host, family: literal }] : await resolve(host, family);
  if (addresses.length === 0) {
    throw Object.assign(new Error(`No address found for ${host}`), { code: 'ENOTFOUND' });
  }
  checkWebhookAddresses(host, addresses, policy);
  return addresses;
}

/**
 * How long (ms) the webhook lookup reuses a name's DNS answer for new connections (issue #11
 * throughput: a burst to one receiver opens up to its connection cap at once, each asking the
 * resolver). Short, so a receiver that moves is followed within seconds; the addresses of a reused
 * answer are checked again on every use, so only addresses the policy allows are ever connected to.
 */
export const WEBHOOK_DNS_CACHE_MS = 5_000;
/** Names whose answers are kept at most (the oldest is dropped past it). */
const WEBHOOK_DNS_CACHE_ENTRIES = 1_000;

/**
 * A `lookup` for the webhook HTTP agent (undici `connect.lookup`): connections go only to checked
 * addresses, so a DNS answer changed after any earlier check (rebinding) cannot slip through.
 * Successful answers are reused for `cacheMs` per name and family (failures are not kept), their
 * addresses checked again at each connection. Node skips `lookup` for IP literals: the client
 * checks those itself.
 * @param options.cacheMs how long an answer is reused (ms; default {@link WEBHOOK_DNS_CACHE_MS};
 *   0 = ask the resolver for every connection).
 */
export function webhookLookup(
  policy: OutboundPolicy,
  resolve: Resolver = systemResolver,
  options: { cacheMs?: number } = {},
): LookupFunction {
  const cacheMs = options.cacheMs ?? WEBHOOK_DNS_CACHE_MS;
  const answers = new Map<string, { addresses: LookupAddress[]; until: number }>();
  /** The name's addresses: a fresh cached answer, else the resolver's (kept when it succeeded). */
  const addressesOf = async (hostname: string, family: 0 | 4 | 6): Promise<LookupAddress[]> => {
    const key = `${family}:${hostname}`;
    const cached = answers.get(key);
    if (cached && cached.until > Date.now()) {
      checkWebhookAddresses(hostname, cached.addresses, policy);
      return cached.addresses;
    }
    answers.delete(key);
    const addresses = await resolveWebhookHost(hostname, policy, resolve, family);
    if (cacheMs > 0 && !isIP(hostname)) {
      if (answers.size >= WEBHOOK_DNS_CACHE_ENTRIES) answers.delete(answers.keys().next().value!);
      answers.set(key, { addresses, until: Date.now() + cacheMs });
    }
    return addresses;
  };
  return (hostname, lookupOptions, callback) => {
    const requested = lookupOptions.family;
    const family =
      requested === 4 || requested === 'IPv4' ? 4 : requested === 6 || requested === 'IPv6' ? 6 : 0;
    addressesOf(hostname, family).then(
      (addresses) => {
        if (lookupOptions.all) return callback(null, addresses);
        const [first] = addresses as [LookupAddress];
        callback(null, first.address, first.family);
      },
      (error: NodeJS.ErrnoException) => callback(error, ''),
    );
  };
}

/**
 * Why `url` cannot be a webhook URL, or undefined when it can: an absolute http(s) URL without
 * credentials, and https when `requireHttps` (spec "Webhook": "Must be HTTPS in production"), not
 * naming port 0 nor a host no resolver takes (WHATWG URL takes `a..b`, `-a.test`, a 64-character
 * label; {@link isHostOrAddress}): such URLs were saved and every delivery failed (review finding,
 * session 22). An internationalised name is in its xn-- form here.
 */
export function webhookUrlProblem(url: string, requireHttps: boolean): string | undefined {
  let parsed: URL;
  try {
    parsed = new URL(url);
  } catch {
    return 'must be an absolute URL';
  }
  if (parsed.protocol !== 'https:' && parsed.protocol !== 'http:') return 'must be an http(s) URL';
  if (requireHttps && parsed.protocol !== 'https:') return 'must be an https URL (NODE_ENV=production)';
  if (parsed.username || parsed.password) return 'must not carry credentials';
  // URL gives the port in plain digits (":00" is "0") and "" for the scheme's default.
  if (parsed.port === '0') return 'must not name port 0';
  if (!isHostOrAddress(parsed.hostname.replace(/^\[|\]$/g, ''))) {
    return 'must name a valid host (labels of letters, digits and inner hyphens) or an IP address';
  }
  return undefined;
}

/** True when webhook URLs must be https: NODE_ENV=production (what `postwright start` sets by default). */
export function httpsRequired(): boolean {
  return process.env.NODE_ENV === 'production';
}
