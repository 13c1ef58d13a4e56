import { isIP } from 'node:net';

/**
 * A host name as RFC 1123 §2.1 allows it: dot-separated labels of ASCII letters, digits and inner
 * hyphens, each 1-63 characters, 253 in all, an optional final dot. Underscores are taken too:
 * container and service names (Docker Compose) may have them and resolve. A name outside ASCII is
 * not one: the system resolver does not convert it, so it must be written in its `xn--` form.
 */
const HOST_NAME =
  /^(?=.{1,253}\.?$)[a-z0-9_](?:[a-z0-9_-]{0,61}[a-z0-9_])?(?:\.[a-z0-9_](?:[a-z0-9_-]{0,61}[a-z0-9_])?)*\.?$/i;

/**
 * True when `value` is an IP address (IPv6 without brackets) or a host name ({@link HOST_NAME}):
 * what HOST (config.ts) and an SMTP adapter's `host` (providers/smtp.ts) may be. NUL, control,
 * bidi characters, spaces, ports and URLs are not (review finding, session 18).
 */
export function isHostOrAddress(value: string): boolean {
  return isIP(value) !== 0 || HOST_NAME.test(value);
}
