import type { LookupAddress } from 'node:dns';
import { connect, type LookupFunction, type Socket } from 'node:net';
import type { OutboundPolicy } from './address-policy.ts';
import { resolveOutbound } from './outbound-lookup.ts';

/**
 * One TCP connection through the outbound policy: what the SMTP provider hands nodemailer
 * (its `getSocket` option), so nodemailer never resolves or connects by itself.
 */

/** Options of {@link connectOutbound}. */
export interface ConnectOutboundOptions {
  /** Budget for resolving and connecting together, in ms. */
  timeoutMs: number;
  /** When the budget started (epoch ms), if earlier than the call; defaults to now. */
  startedAt?: number;
}

/**
 * Resolves `host`, checks every address ({@link resolveOutbound}) and opens a plain TCP socket to
 * one of those checked addresses (Node tries them in turn, IPv6 and IPv4 interleaved, RFC 8305);
 * the name is not resolved a second time. TLS, when wanted, is layered on the returned socket by
 * the caller, with the original `host` as the certificate name.
 * @param host name or IP literal as configured.
 * @param port TCP port, 1-65535.
 * @returns the connected socket (no timeout or error listener left on it).
 * @throws OutboundRefusedError (EOUTBOUND) for a refused destination; an error with code
 *   ETIMEDOUT when resolving and connecting took longer than `timeoutMs`; the resolver's errors
 *   (ENOTFOUND, EAI_AGAIN) and the socket's (ECONNREFUSED, EHOSTUNREACH, ...) unchanged.
 */
export async function connectOutbound(
  host: string,
  port: number,
  policy: OutboundPolicy,
  options: ConnectOutboundOptions,
): Promise<Socket> {
  const deadline = (options.startedAt ?? Date.now()) + options.timeoutMs;
  const timedOut = () =>
    Object.assign(new Error(`Connection to ${host}:${port} timed out`), { code: 'ETIMEDOUT' });
  // A caller whose budget is already spent (e.g. nodemailer's connection phase) gets no socket.
  if (deadline <= Date.now()) throw timedOut();
  let timer: NodeJS.Timeout | undefined;
  const expired = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(timedOut()), Math.max(deadline - Date.now(), 0));
  });
  try {
    const addresses = await Promise.race([resolveOutbound(host, policy), expired]);
    const socket = connect({ host, port, lookup: checkedAddresses(addresses) });
    try {
      return await Promise.race([
        new Promise<Socket>((resolve, reject) => {
          socket.once('connect', () => {
            socket.removeListener('error', reject);
            resolve(socket);
          });
          socket.once('error', reject);
        }),
        expired,
      ]);
    } catch (error) {
      socket.destroy();
      throw error;
    }
  } finally {
    clearTimeout(timer);
  }
}

/** A lookup that answers with addresses already checked, whatever name it is asked for. */
function checkedAddresses(addresses: LookupAddress[]): LookupFunction {
  return (_hostname, options, callback) => {
    if (options.all) return callback(null, addresses);
    const [first] = addresses as [LookupAddress];
    callback(null, first.address, first.family);
  };
}
