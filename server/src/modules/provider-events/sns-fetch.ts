import { isIP } from 'node:net';
import type { Agent } from 'undici';
import {
  createOutboundLookup,
  type OutboundPolicy,
  OutboundRefusedError,
  resolveOutbound,
} from '../../outbound/index.ts';

/**
 * The HTTP client of the SNS handler (ses.events.ts): GETs an SNS signing certificate or a
 * SubscribeURL. CONVENTIONS.md: outbound HTTP goes through one client that enforces timeouts,
 * refuses redirects, caps response bodies and applies the SSRF guard. The guard is the outbound
 * policy of SMTP and the providers' APIs (outbound/address-policy.ts, SMTP_ALLOW_PRIVATE): the
 * socket connects only to addresses the policy allowed, checked at connect time (no DNS
 * rebinding). Before, the handler fetched with the global `fetch`, whatever the name resolved to
 * (review finding, session 22). The operator's PROVIDER_EVENTS_SNS_ENDPOINT origin is trusted
 * configuration, like PROVIDER_ENDPOINT_* (providers/http-transport.ts): it skips the policy.
 */

/** A certificate or SubscribeURL fetch gives up after this long (ms), body included. */
export const SNS_FETCH_TIMEOUT_MS = 10_000;

/** Most bytes read of an SNS answer (a signing certificate is about 2 KB). */
export const SNS_FETCH_MAX_BYTES = 64 * 1024;

/** Options of {@link createSnsFetch}. */
export interface SnsFetchOptions {
  /** Which addresses the fetched hosts may resolve to (the app's `ctx.outbound`). */
  policy: OutboundPolicy;
  /** The operator's PROVIDER_EVENTS_SNS_ENDPOINT (an origin), fetched without the policy. */
  trustedEndpoint?: string | undefined;
  /** Default {@link SNS_FETCH_TIMEOUT_MS}. */
  timeoutMs?: number | undefined;
}

/** The SNS handler's fetcher: `fetchText` for ProviderEventDeps, `close` for the app's shutdown. */
export interface SnsFetch {
  /**
   * GETs `url`: no redirects, the timeout, 2xx only, at most {@link SNS_FETCH_MAX_BYTES}.
   * @returns the body as UTF-8 text.
   * @throws OutboundRefusedError (code EOUTBOUND) when the host is (or resolves to) an address the
   *   policy refuses; Error for a non-2xx answer, a longer body, a timeout or a network error.
   */
  fetchText(url: string): Promise<string>;
  /** Closes the pooled connections. */
  close(): Promise<void>;
}

/** A new {@link SnsFetch}; undici is loaded on the first fetch (idle memory, issue #9). */
export function createSnsFetch(options: SnsFetchOptions): SnsFetch {
  // An origin of "null" (a scheme without one) would match every such URL: trusted is http(s) only.
  const endpointOrigin = options.trustedEndpoint ? new URL(options.trustedEndpoint).origin : undefined;
  const trustedOrigin = endpointOrigin === 'null' ? undefined : endpointOrigin;
  const timeoutMs = options.timeoutMs ?? SNS_FETCH_TIMEOUT_MS;
  let agent: Promise<Agent> | undefined;
  const guarded = () => {
    agent ??= import('undici').then(
      ({ Agent }) => new Agent({ connect: { lookup: createOutboundLookup(options.policy) } }),
    );
    return agent;
  };
  return {
    async fetchText(url) {
      const parsed = new URL(url);
      let dispatcher: Agent | undefined;
      if (parsed.origin !== trustedOrigin) {
        // Node connects to an IP literal without calling the lookup: its verdict is checked here.
        const host = parsed.hostname.replace(/^\[|\]$/g, '');
        if (isIP(host) !== 0) await resolveOutbound(host, options.policy);
        dispatcher = await guarded();
      }
      const init = { redirect: 'error', signal: AbortSignal.timeout(timeoutMs), dispatcher };
      const response = await fetch(url, init as RequestInit).catch((error: unknown) => {
        // fetch rejects with a bare "fetch failed": the policy's refusal is its cause.
        const cause = (error as { cause?: unknown }).cause;
        throw cause instanceof OutboundRefusedError ? cause : error;
      });
      if (!response.ok) throw new Error(`GET ${url} answered ${response.status}`);
      const chunks: Uint8Array[] = [];
      let size = 0;
      for await (const chunk of (response.body ?? []) as unknown as AsyncIterable<Uint8Array>) {
        size += chunk.byteLength;
        if (size > SNS_FETCH_MAX_BYTES)
          throw new Error(`GET ${url} answered more than ${SNS_FETCH_MAX_BYTES} bytes`);
        chunks.push(chunk);
      }
      return Buffer.concat(chunks).toString('utf8');
    },
    async close() {
      if (agent) await (await agent).close();
    },
  };
}
