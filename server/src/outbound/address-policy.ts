import ipaddr from 'ipaddr.js';

/**
 * Which network addresses an outbound connection may reach (issue #8: an SMTP adapter pointed at
 * 127.0.0.1:22 or 169.254.169.254 turned the server into an SSRF and port-scan tool).
 * The rule is an allow-list of global unicast space, not a deny-list of known private ranges, so a
 * special-purpose range nobody thought of is refused too:
 * - IPv4: allowed when ipaddr.js classifies it `unicast`, i.e. outside every IANA IPv4
 *   Special-Purpose Address Registry block it knows (RFC 6890): 0/8, 10/8, 100.64/10 (CGNAT),
 *   127/8, 169.254/16, 172.16/12, 192.168/16, multicast, reserved, benchmarking, ...
 * - IPv6: allowed when it is in 2000::/3 (the only block IANA allocates global unicast from,
 *   RFC 4291 2.4) and ipaddr.js classifies it `unicast`; so ::1, ::, fc00::/7 (ULA), fe80::/10,
 *   NAT64 (64:ff9b::/96), 6to4, Teredo and the deprecated IPv4-compatible ::a.b.c.d are refused.
 * - IPv4-mapped IPv6 (`::ffff:127.0.0.1`, `::ffff:7f00:1`) is judged as the IPv4 address it maps.
 * Cloud metadata endpoints are refused whatever the operator allows.
 */

/** What the operator allows (`SMTP_ALLOW_PRIVATE`, config.ts). */
export interface OutboundPolicy {
  /** Also allow non-public addresses (loopback, private, link-local, CGNAT, ...); never metadata. */
  allowPrivate: boolean;
}

/** The refusal of every outbound connection unless the operator says otherwise. */
export const DEFAULT_OUTBOUND_POLICY: OutboundPolicy = { allowPrivate: false };

/** The environment variable that lifts the private-address refusal; refusals name it. */
export const ALLOW_PRIVATE_VARIABLE = 'SMTP_ALLOW_PRIVATE';

/**
 * Instance-metadata endpoints that hand out cloud credentials: refused always.
 * - 169.254.169.254: AWS EC2 IMDS, Google Compute Engine, Azure IMDS, Oracle Cloud, OpenStack,
 *   DigitalOcean, Hetzner (each provider's metadata documentation).
 * - 169.254.170.2: AWS ECS task metadata and task-role credentials endpoint.
 * - fd00:ec2::254: AWS EC2 IMDS over IPv6 (Nitro instances).
 * - 100.100.100.200: Alibaba Cloud ECS metadata.
 * - 168.63.129.16: Azure WireServer (a public address, so the allow-list alone would not refuse it).
 */
const METADATA_ADDRESSES = new Set(
  ['169.254.169.254', '169.254.170.2', 'fd00:ec2::254', '100.100.100.200', '168.63.129.16'].map((a) =>
    ipaddr.parse(a).toNormalizedString(),
  ),
);

/** 2000::/3, IANA's global unicast block (RFC 4291 2.4, IANA IPv6 Address Space registry). */
const IPV6_GLOBAL_UNICAST = ipaddr.IPv6.parseCIDR('2000::/3');

/** Where the address falls: `public` is the only class allowed by default. */
export type AddressClass =
  | { kind: 'public' }
  | { kind: 'metadata' }
  | { kind: 'private' /** e.g. `loopback`, `private-network`, `link-local` */; range: string };

/** The words a refusal uses for each ipaddr.js range name. */
const RANGE_LABELS: Record<string, string> = {
  loopback: 'loopback',
  private: 'private-network',
  uniqueLocal: 'private-network (unique local)',
  linkLocal: 'link-local',
  carrierGradeNat: 'carrier-grade NAT',
  unspecified: 'unspecified',
};

/**
 * Classifies one IP address (no DNS: `address` is a literal as `dns.lookup` returns it).
 * @param address IPv4 or IPv6 text, with or without an IPv6 zone id.
 * @returns `metadata` for a cloud metadata endpoint (also inside IPv4-mapped, IPv4-compatible,
 *   NAT64 and 6to4 forms), `private` with a label for every non-global range, else `public`.
 * @throws TypeError when `address` is not an IP address.
 */
export function classifyAddress(address: string): AddressClass {
  if (!ipaddr.isValid(address)) throw new TypeError(`Not an IP address: ${address}`);
  const parsed = ipaddr.process(address); // IPv4-mapped IPv6 becomes the IPv4 address it maps
  const embedded = parsed.kind() === 'ipv6' ? embeddedIPv4(parsed as ipaddr.IPv6) : undefined;
  for (const candidate of [parsed, embedded]) {
    if (candidate && METADATA_ADDRESSES.has(candidate.toNormalizedString())) return { kind: 'metadata' };
  }
  const range = parsed.range();
  const global =
    range === 'unicast' && (parsed.kind() === 'ipv4' || (parsed as ipaddr.IPv6).match(IPV6_GLOBAL_UNICAST));
  if (global) return { kind: 'public' };
  return { kind: 'private', range: RANGE_LABELS[range] ?? 'special-purpose' };
}

/**
 * The IPv4 address an IPv6 address carries, for the forms that route to it: IPv4-compatible
 * `::a.b.c.d` (RFC 4291 2.5.5.1), SIIT `::ffff:0:a.b.c.d` (RFC 6145), NAT64 `64:ff9b::a.b.c.d`
 * (RFC 6052) and 6to4 `2002:AABB:CCDD::` (RFC 3056). Teredo obfuscates its address and is not read.
 */
function embeddedIPv4(address: ipaddr.IPv6): ipaddr.IPv4 | undefined {
  const p = address.parts as [number, number, number, number, number, number, number, number];
  const fromWords = (high: number, low: number) =>
    new ipaddr.IPv4([high >> 8, high & 0xff, low >> 8, low & 0xff]);
  const range = address.range();
  if (range === '6to4') return fromWords(p[1], p[2]);
  const nat64WellKnown = p[0] === 0x64 && p[1] === 0xff9b && p.slice(2, 6).every((word) => word === 0);
  if (nat64WellKnown || range === 'rfc6145') return fromWords(p[6], p[7]);
  const compatible = p.slice(0, 6).every((word) => word === 0) && (p[6] !== 0 || p[7] > 1);
  return compatible ? fromWords(p[6], p[7]) : undefined;
}

/**
 * Why `address` may not be reached under `policy`, or undefined when it may.
 * @returns `metadata` (refused always) or the label of the private range (refused unless
 *   `policy.allowPrivate`).
 */
export function refusalOf(
  address: string,
  policy: OutboundPolicy,
): Exclude<AddressClass, { kind: 'public' }> | undefined {
  const verdict = classifyAddress(address);
  if (verdict.kind === 'metadata') return verdict;
  if (verdict.kind === 'private' && !policy.allowPrivate) return verdict;
  return undefined;
}
