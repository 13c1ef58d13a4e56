import type { Agent as HttpAgent } from 'node:http';
import type { Agent as HttpsAgent } from 'node:https';
import type { Agent as UndiciAgent } from 'undici';
import {
  createOutboundLookup,
  DEFAULT_OUTBOUND_POLICY,
  type OutboundPolicy,
  resolveOutbound,
} from '../outbound/index.ts';
import type { ProviderContext } from './definition.ts';
import { lazyModule } from './lazy-module.ts';
import { ProviderError } from './types.ts';

/** undici, required when the first hosted-API provider is made (idle servers never load it). */
/**
 * node:http and node:https as CommonJS exports: an ESM `import` of them builds their namespace, which
 * reads every export, and the WebSocket, CloseEvent and MessageEvent getters Node.js ≥ 22 puts on
 * node:http load Node.js's own bundled undici at start (≈ 5 MB resident; idle memory, issue #9).
 */
const http = process.getBuiltinModule('node:http');
const { STATUS_CODES } = http;
const https = process.getBuiltinModule('node:https');

const undici = lazyModule<typeof import('undici')>('undici');

/**
 * The HTTP plumbing the hosted-API providers share (issue #10): where each one connects (its public
 * API, or the operator's `PROVIDER_ENDPOINT_*` override), the keep-alive connection pools its SDK is
 * given, the one rule that classifies an HTTP failure, and how a send is given up on its signal.
 */

/** Keep-alive connection pools of one provider instance (= one adapter version). */
export interface HttpTransport {
  /** Base URL without a trailing slash: the operator's override, else the provider's public API. */
  readonly baseUrl: string;
  /**
   * True when `baseUrl` is the operator's override: trusted configuration (like DATABASE_URL), so
   * its connections skip the outbound policy (tests point it at a fake on 127.0.0.1).
   */
  readonly trusted: boolean;
  /** For SDKs on node:http (axios, the AWS SDK): keep-alive, at most `maxConnections` sockets. */
  readonly httpAgent: HttpAgent;
  readonly httpsAgent: HttpsAgent;
  /** For SDKs on fetch: pass as fetch's `dispatcher` (undici); keep-alive by default. */
  readonly dispatcher: UndiciAgent;
  /** `fetch` through {@link dispatcher}. */
  readonly fetch: typeof fetch;
  /**
   * Checks once per instance that the API's host resolves only to addresses the outbound policy
   * allows; for SDKs that take no agent (mailgun.js). Resolves at once for a trusted endpoint.
   * @throws ProviderError (permanent, EOUTBOUND) for a refused address; transient for a DNS error.
   */
  checkHost(): Promise<void>;
  /** Closes the pools' idle connections; the instance must not be used afterwards. */
  close(): Promise<void>;
}

/** How long (ms) closing waits for requests in flight before cutting their connections. */
const CLOSE_GRACE_MS = 2_000;

/** Options of {@link createHttpTransport}. */
export interface HttpTransportOptions {
  /** The provider's public API, e.g. `https://api.resend.com`. */
  defaultBaseUrl: string;
  /** The operator's base-URL override (`PROVIDER_ENDPOINT_*`), if any. */
  endpoint?: string | undefined;
  /** Sockets per host at most (ADAPTER_MAX_CONNECTIONS); default 10. */
  maxConnections?: number | undefined;
  /** Which addresses may be reached (default: public only). Ignored for a trusted endpoint. */
  outbound?: OutboundPolicy | undefined;
  /**
   * Ends a fetch request (undici) whose response headers or body stall this long (ms); see
   * ProviderContext.requestTimeoutMs. Default: undici's own (300 s).
   */
  requestTimeoutMs?: number | undefined;
}

/**
 * Builds the connection pools of one provider instance. Untrusted connections resolve their host
 * through {@link createOutboundLookup}, so the socket opens only to addresses the policy checked.
 */
export function createHttpTransport(options: HttpTransportOptions): HttpTransport {
  const trusted = options.endpoint !== undefined && options.endpoint !== '';
  const baseUrl = (trusted ? options.endpoint! : options.defaultBaseUrl).replace(/\/+$/, '');
  const policy = options.outbound ?? DEFAULT_OUTBOUND_POLICY;
  const maxSockets = options.maxConnections ?? 10;
  const lookup = trusted ? undefined : createOutboundLookup(policy);
  const nodeOptions = { keepAlive: true, maxSockets, ...(lookup ? { lookup } : {}) };
  const httpAgent = new http.Agent(nodeOptions);
  const httpsAgent = new https.Agent(nodeOptions);
  const dispatcher = new (undici().Agent)({
    connections: maxSockets,
    ...(options.requestTimeoutMs
      ? { headersTimeout: options.requestTimeoutMs, bodyTimeout: options.requestTimeoutMs }
      : {}),
    ...(lookup ? { connect: { lookup } } : {}),
  });
  let hostChecked: Promise<void> | undefined;
  return {
    baseUrl,
    trusted,
    httpAgent,
    httpsAgent,
    dispatcher,
    // fetch rejects with a bare "fetch failed"; the reason (ECONNREFUSED, a refused address) is in
    // its cause, which SDKs that keep only the message (postmark) would lose.
    fetch: ((input, init) =>
      fetch(input as string, { ...init, dispatcher } as RequestInit).catch((error: unknown) => {
        const root = rootCause(error);
        if (root === error || init?.signal?.aborted) throw error;
        throw Object.assign(new Error(errorMessage(root), { cause: error }), {
          code: (root as { code?: unknown }).code,
        });
      })) as typeof fetch,
    checkHost() {
      if (trusted) return Promise.resolve();
      hostChecked ??= resolveOutbound(new URL(baseUrl).hostname, policy).then(
        () => {},
        (error: unknown) => {
          hostChecked = undefined;
          throw classifyHttpFailure({ message: errorMessage(error), cause: error });
        },
      );
      return hostChecked;
    },
    async close() {
      httpAgent.destroy();
      httpsAgent.destroy();
      // undici's close waits for requests in flight; one given up at its deadline may never end.
      let timer: NodeJS.Timeout | undefined;
      const grace = new Promise<void>((resolve) => {
        timer = setTimeout(resolve, CLOSE_GRACE_MS);
      });
      await Promise.race([dispatcher.close(), grace]).finally(() => clearTimeout(timer));
      await dispatcher.destroy().catch(() => {});
    },
  };
}

/** What a provider's SDK told about a failed call, in the terms {@link classifyHttpFailure} needs. */
export interface HttpFailure {
  /** The HTTP status; undefined when no response came (network error, refused address, timeout). */
  status?: number | undefined;
  /** The provider's own error message (from its error body), or the network error's. */
  message: string;
  /** The provider's error code or name, e.g. `validation_error`, `MessageRejected`. */
  code?: string | undefined;
  cause?: unknown;
}

/**
 * The one rule for HTTP provider failures (issue #10 "Errors classified in one place"):
 * - no response (network error, DNS failure, timeout), 429 and 5xx → transient: the queue retries
 *   with backoff;
 * - an address the outbound policy refuses (EOUTBOUND anywhere in the cause chain) → permanent;
 * - any other status (4xx: bad request, bad credentials, unverified sender) → permanent.
 * The message is the provider's own; the code is the provider's code, else the HTTP status.
 */
export function classifyHttpFailure(failure: HttpFailure): ProviderError {
  const refused = causeWithCode(failure.cause, 'EOUTBOUND');
  const status = failure.status;
  const transient = !refused && (status === undefined || status === 429 || status >= 500);
  const code = refused ? 'EOUTBOUND' : (failure.code ?? (status === undefined ? undefined : String(status)));
  return new ProviderError(refused ? errorMessage(refused) : providerMessage(failure), {
    permanent: !transient,
    ...(code ? { providerCode: code } : {}),
    ...(failure.cause === undefined ? {} : { cause: failure.cause }),
  });
}

/** Most characters of a provider's message kept as the log's errorMessage. */
export const MAX_PROVIDER_MESSAGE_CHARS = 1000;

/**
 * The message to record for `failure`: the provider's own, cut to {@link MAX_PROVIDER_MESSAGE_CHARS};
 * but `HTTP <status> <reason phrase>` when the body was not the provider's error at all (review
 * finding, session 16): a proxy's or load balancer's HTML page (Mailgun stored it whole), a body the
 * SDK could not parse (SES: "Deserialization error…"), or the Resend SDK's stand-in for a non-JSON
 * answer, which says "try again later" even for a permanent 413.
 */
function providerMessage(failure: HttpFailure): string {
  const { status } = failure;
  const text = failure.message.trim();
  const notTheProviders =
    text === '' ||
    (status !== undefined && text === STATUS_CODES[status]) ||
    text.startsWith('<') ||
    /Deserialization error|is not valid JSON/.test(text) ||
    failure.code === 'application_error';
  if (status !== undefined && notTheProviders) {
    return `HTTP ${status}${STATUS_CODES[status] ? ` ${STATUS_CODES[status]}` : ''}`;
  }
  const message = text || (status === undefined ? 'request failed' : `HTTP ${status}`);
  return message.length > MAX_PROVIDER_MESSAGE_CHARS
    ? `${message.slice(0, MAX_PROVIDER_MESSAGE_CHARS - 1)}…`
    : message;
}

/** The first error in `error`'s cause chain whose `code` is `code`. */
function causeWithCode(error: unknown, code: string): Error | undefined {
  let current: unknown = error;
  for (let depth = 0; current instanceof Error && depth < 10; depth += 1) {
    if ((current as { code?: unknown }).code === code) return current;
    current = current.cause;
  }
  return undefined;
}

/** The last error in `error`'s cause chain. */
function rootCause(error: unknown): unknown {
  let current = error;
  for (let depth = 0; current instanceof Error && current.cause instanceof Error && depth < 10; depth += 1) {
    current = current.cause;
  }
  return current;
}

/** `error`'s message, or its string form. */
export function errorMessage(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}

/**
 * Runs one HTTP send under `signal` (the worker's deadline). Given up before it starts: a transient
 * ProviderError (EABORT), nothing was sent. Given up while the request is under way: a ProviderError
 * with `ambiguous` set, since the provider may have accepted the email already (the request is left
 * to finish in the background, its result ignored; the error's `settled` tells when it ended). `send`'s own errors pass through `classify`.
 * @throws ProviderError.
 */
export async function sendUnderSignal<T>(
  provider: string,
  signal: AbortSignal | undefined,
  send: () => Promise<T>,
  classify: (error: unknown) => ProviderError,
): Promise<T> {
  if (signal?.aborted) {
    throw new ProviderError(`${provider} send given up (${reasonOf(signal)}) before the request was made`, {
      permanent: false,
      providerCode: 'EABORT',
    });
  }
  const request = send().catch((error: unknown) => {
    throw error instanceof ProviderError ? error : classify(error);
  });
  if (!signal) return request;
  let onAbort: (() => void) | undefined;
  const aborted = new Promise<never>((_, reject) => {
    onAbort = () =>
      reject(
        new ProviderError(
          `${provider} send given up (${reasonOf(signal)}) while the request was under way: it may have been delivered`,
          {
            permanent: false,
            ambiguous: true,
            providerCode: 'EABORT',
            settled: request.then(
              () => {},
              () => {},
            ),
          },
        ),
      );
    signal.addEventListener('abort', onAbort, { once: true });
  });
  request.catch(() => {});
  try {
    return await Promise.race([request, aborted]);
  } finally {
    if (onAbort) signal.removeEventListener('abort', onAbort);
  }
}

function reasonOf(signal: AbortSignal): string {
  return signal.reason instanceof Error ? signal.reason.message : String(signal.reason);
}

/** Base64 of an attachment's bytes (the JSON APIs' attachment encoding). */
export function base64(content: Buffer): string {
  return content.toString('base64');
}

/**
 * {@link createHttpTransport} of a hosted-API provider being created with `context`: its public API
 * at `defaultBaseUrl` unless the operator set the type's PROVIDER_ENDPOINT_* (`context.http`).
 */
export function httpTransportFor(defaultBaseUrl: string, context: ProviderContext): HttpTransport {
  return createHttpTransport({
    defaultBaseUrl,
    endpoint: context.http?.endpoint,
    maxConnections: context.maxConnections,
    outbound: context.outbound,
    requestTimeoutMs: context.requestTimeoutMs,
  });
}
