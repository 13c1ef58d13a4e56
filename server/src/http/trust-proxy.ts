import { isIP } from 'node:net';
import { z } from 'zod';

/**
 * Which `X-Forwarded-For` hops the app believes (Fastify's `trustProxy`, resolved by proxy-addr):
 * - `false`: none; the client IP is the socket's address.
 * - a number N ≥ 1: the N nearest hops are our proxies, so the client IP is the Nth address from
 *   the right of `socket, …X-Forwarded-For` (1 = one reverse proxy in front).
 * - a list of proxy addresses/CIDRs (or proxy-addr's names `loopback`, `linklocal`,
 *   `uniquelocal`): hops from those addresses are skipped, the first other one is the client.
 *
 * Fastify 5.12 ignores a numeric `trustProxy` (it fails closed, trusting no hop, because a client
 * that reaches the app directly can forge the hops); {@link fastifyTrustProxy} turns a hop count into
 * the equivalent trust function, for deployments the README describes: reachable only through
 * their proxies, whose addresses are not known in advance.
 *
 * `true` (trust every hop) is refused: the client IP would be the leftmost `X-Forwarded-For` entry,
 * which the client writes itself, so per-IP limits such as sign-in's could be dodged (issue #8).
 */
export type TrustProxy = false | number | string[];

/** proxy-addr's pre-defined ranges (127.0.0.1/8 and ::1; 169.254.0.0/16 and fe80::/10; private ranges and fc00::/7). */
const NAMED_RANGES = new Set(['loopback', 'linklocal', 'uniquelocal']);

/** Hop counts above this are a typo, not a network. */
const MAX_HOPS = 20;

/** True for an IP address, an IP/prefix-length CIDR, or one of proxy-addr's named ranges. */
function isProxyAddress(entry: string): boolean {
  if (NAMED_RANGES.has(entry)) return true;
  const [address = '', prefix, ...rest] = entry.split('/');
  const version = isIP(address);
  if (rest.length > 0 || version === 0) return false;
  if (prefix === undefined) return true;
  return /^\d{1,3}$/.test(prefix) && Number(prefix) <= (version === 4 ? 32 : 128);
}

/**
 * `TRUST_PROXY` as read from the environment: `false`/`0`, a hop count, or a comma-separated list of
 * proxy addresses/CIDRs. Invalid values (including `true`) give a one-line message saying what to
 * write instead.
 */
export const trustProxySchema = z
  .string()
  .trim()
  .transform((value, ctx): TrustProxy => {
    if (value === 'false' || value === '0') return false;
    if (value === 'true') {
      ctx.addIssue({
        code: 'custom',
        message:
          '"true" would believe any X-Forwarded-For a client sends; give the number of proxies in front of ' +
          'Postwright (e.g. 1) or their addresses/CIDRs (e.g. 10.0.0.0/8,127.0.0.1)',
      });
      return z.NEVER;
    }
    if (/^\d+$/.test(value)) {
      const hops = Number(value);
      if (hops <= MAX_HOPS) return hops;
      ctx.addIssue({ code: 'custom', message: `a hop count must be at most ${MAX_HOPS}` });
      return z.NEVER;
    }
    const entries = value
      .split(',')
      .map((entry) => entry.trim())
      .filter((entry) => entry !== '');
    const bad = entries.find((entry) => !isProxyAddress(entry));
    if (bad !== undefined || entries.length === 0) {
      ctx.addIssue({
        code: 'custom',
        message: `"${bad ?? value}" is not a hop count, an IP address or a CIDR (e.g. 1, or 10.0.0.0/8,127.0.0.1)`,
      });
      return z.NEVER;
    }
    return entries;
  });

/**
 * The `trustProxy` option for Fastify: `false`, the address list as is (proxy-addr compiles it), or
 * for a hop count N a function trusting the N hops nearest the app (hop 0 = the socket's peer),
 * which is Express's and proxy-addr's meaning of a hop count.
 */
export function fastifyTrustProxy(
  trustProxy: TrustProxy,
): false | string[] | ((address: string, hop: number) => boolean) {
  if (typeof trustProxy !== 'number') return trustProxy;
  const hops = trustProxy;
  return (_address, hop) => hop < hops;
}
