import { EventEmitter } from 'node:events';
import { isIP } from 'node:net';
import type { Readable } from 'node:stream';
import type { Agent } from 'undici';
import type { OutboundPolicy } from '../../outbound/index.ts';
import {
  checkWebhookAddresses,
  httpsRequired,
  type Resolver,
  WebhookDestinationRefusedError,
  webhookLookup,
  webhookUrlProblem,
} from './webhook-destination.ts';

/** What one delivery attempt got (spec "Webhook delivery": responseStatus, responseBody, success). */
export interface AttemptResult {
  success: boolean;
  /** The HTTP status, or null when no answer came (refused, timeout, connection error). */
  responseStatus: number | null;
  /** The first {@link RESPONSE_BODY_LIMIT_BYTES} of the answer's body (UTF-8), or null. */
  responseBody: string | null;
  /** Why no answer came (null when one did). */
  error: string | null;
  /** Wall time from the start of the request to the end of reading the body (ms). */
  durationMs: number;
}

/** Response bodies are kept up to 2 KB in delivery records (issue #11). */
export const RESPONSE_BODY_LIMIT_BYTES = 2048;

/** Connections to one receiver at once (per process); keep-alive reuses them. */
const CONNECTIONS_PER_ORIGIN = 64;

/** Webhook URLs whose parsed form a client keeps (all of them are dropped past it). */
const TARGETS_KEPT = 1_000;

/** A webhook URL as the client uses it, worked out once per URL (see WebhookClient.post). */
interface Target {
  /** The parsed URL (undici takes it as is), when it is one. */
  url: URL | undefined;
  /** webhookUrlProblem's answer without and with the https requirement. */
  problem: readonly [string | undefined, string | undefined];
  /**
   * For an IP-literal host (Node connects to it without calling the lookup), the policy's refusal
   * of it, null when allowed; undefined for a name (the lookup checks what it resolves to).
   */
  literalRefusal: string | null | undefined;
}

/**
 * The abort signal of attempts: an EventEmitter with `aborted` and `reason`, which undici's
 * `request` takes like an AbortSignal (its `signal` option: AbortSignal or EventEmitter). Adding
 * and removing a listener costs an EventEmitter a push and a splice; an AbortSignal (an
 * EventTarget) several times that (issue #11 bench profile).
 */
class DeadlineSignal extends EventEmitter {
  aborted = false;
  reason: unknown;

  constructor() {
    super();
    // Every attempt of a window listens to it; none of them leaks (undici removes its listener).
    this.setMaxListeners(0);
  }

  abort(reason: unknown): void {
    this.aborted = true;
    this.reason = reason;
    this.emit('abort');
  }
}

/**
 * The signals that end attempts at their deadline: attempts starting within one window share one
 * signal and one timer (an AbortSignal.timeout per attempt cost a timer, a signal and its
 * bookkeeping each, issue #11 bench profile). A window's signal aborts `timeoutMs` after the window
 * closes: every attempt gets at least its `timeoutMs`, and at most one window more.
 */
class DeadlineSignals {
  readonly #timeoutMs: number;
  readonly #windowMs: number;
  #current: { signal: DeadlineSignal; closes: number } | undefined;
  /** Timers started so far (one per window with attempts; for tests and diagnostics). */
  timers = 0;

  constructor(timeoutMs: number) {
    this.#timeoutMs = timeoutMs;
    // 100 ms at the usual 30 s; a twentieth of a short test timeout.
    this.#windowMs = Math.max(1, Math.min(100, Math.floor(timeoutMs / 20)));
  }

  /** The signal of an attempt starting now. */
  next(): DeadlineSignal {
    const now = performance.now();
    if (this.#current && now <= this.#current.closes) return this.#current.signal;
    const signal = new DeadlineSignal();
    this.timers++;
    const seconds = this.#timeoutMs / 1000;
    setTimeout(
      () => signal.abort(new DOMException(`No answer within ${seconds} s`, 'TimeoutError')),
      this.#timeoutMs + this.#windowMs,
    ).unref();
    this.#current = { signal, closes: now + this.#windowMs };
    return signal;
  }
}

/**
 * The HTTP client of webhook deliveries (issue #11): POSTs a signed JSON body, with an overall
 * deadline, no redirects followed (undici's `request` follows none: a 3xx is a failed attempt),
 * https only in production, the SSRF guard on every connection's resolved address (an IP-literal
 * host on every request), and the response body read up to 2 KB only.
 */
export class WebhookClient {
  /** undici, imported on the first delivery: an idle server never loads it (issue #9 idle memory). */
  #agent: Promise<{ agent: Agent; request: typeof import('undici').request }> | undefined;
  readonly #lookup: ReturnType<typeof webhookLookup>;
  readonly #policy: OutboundPolicy;
  readonly #timeoutMs: number;
  readonly #deadlines: DeadlineSignals;
  readonly #targets = new Map<string, Target>();

  /**
   * For tests and diagnostics: URLs parsed and judged so far ({@link WebhookClient.post} does it
   * once per URL), and deadline timers started (one per 100 ms window with attempts).
   */
  get stats(): { targetsParsed: number; deadlineTimers: number } {
    return { targetsParsed: this.#targetsParsed, deadlineTimers: this.#deadlines.timers };
  }
  #targetsParsed = 0;

  constructor(options: { policy: OutboundPolicy; timeoutSeconds: number; resolve?: Resolver }) {
    this.#policy = options.policy;
    this.#timeoutMs = options.timeoutSeconds * 1000;
    this.#deadlines = new DeadlineSignals(this.#timeoutMs);
    this.#lookup = webhookLookup(options.policy, options.resolve);
  }

  #undici(): Promise<{ agent: Agent; request: typeof import('undici').request }> {
    this.#agent ??= import('undici').then(({ Agent, request }) => ({
      agent: new Agent({
        connect: { lookup: this.#lookup, timeout: this.#timeoutMs },
        headersTimeout: this.#timeoutMs,
        bodyTimeout: this.#timeoutMs,
        connections: CONNECTIONS_PER_ORIGIN,
      }),
      request,
    }));
    return this.#agent;
  }

  /**
   * `url` parsed and judged once (the URL's own problems, an IP-literal host's refusal): the same
   * answers on every request, only worked out on the first. A literal's verdict is a function of
   * the address and this client's policy alone; a name is checked at each connection instead.
   */
  #target(url: string): Target {
    let target = this.#targets.get(url);
    if (target) return target;
    this.#targetsParsed++;
    const problem = [webhookUrlProblem(url, false), webhookUrlProblem(url, true)] as const;
    let parsed: URL | undefined;
    let literalRefusal: string | null | undefined;
    if (problem[0] === undefined) {
      parsed = new URL(url);
      const host = parsed.hostname.replace(/^\[|\]$/g, '');
      const family = isIP(host);
      if (family) {
        try {
          checkWebhookAddresses(host, [{ address: host, family }], this.#policy);
          literalRefusal = null;
        } catch (error) {
          literalRefusal = (error as Error).message;
        }
      }
    }
    target = { url: parsed, problem, literalRefusal };
    if (this.#targets.size >= TARGETS_KEPT) this.#targets.clear();
    this.#targets.set(url, target);
    return target;
  }

  /**
   * POSTs `body` to `url` with `headers`; never throws: every failure is an unsuccessful result.
   * Success = a 2xx answer (spec "Events", receiver contract).
   */
  async post(url: string, headers: Record<string, string>, body: string): Promise<AttemptResult> {
    const started = performance.now();
    const elapsed = () => Math.round(performance.now() - started);
    try {
      const target = this.#target(url);
      const problem = target.problem[httpsRequired() ? 1 : 0];
      if (problem || !target.url) throw new Error(`Webhook URL ${problem}`);
      // Node connects to an IP literal without calling the lookup: its verdict is checked here.
      if (target.literalRefusal) throw new WebhookDestinationRefusedError(target.literalRefusal);
      const { agent, request } = await this.#undici();
      const response = await request(target.url, {
        method: 'POST',
        headers: { 'content-type': 'application/json', 'user-agent': 'Postwright-Webhooks/1', ...headers },
        body,
        dispatcher: agent,
        signal: this.#deadlines.next(),
      });
      const responseBody = await readCapped(response.body, RESPONSE_BODY_LIMIT_BYTES);
      const status = response.statusCode;
      return {
        success: status >= 200 && status < 300,
        responseStatus: status,
        responseBody,
        error: null,
        durationMs: elapsed(),
      };
    } catch (error) {
      return {
        success: false,
        responseStatus: null,
        responseBody: null,
        error: describeError(error, this.#timeoutMs / 1000),
        durationMs: elapsed(),
      };
    }
  }

  /** Closes the agent's connections. */
  async close(): Promise<void> {
    if (this.#agent) await (await this.#agent).agent.close();
  }
}

/**
 * `text` with each NUL replaced by U+FFFD: PostgreSQL text and jsonb cannot hold U+0000, and one
 * receiver's NUL would otherwise fail the recording of every attempt grouped with its own.
 */
function withoutNul(text: string): string {
  return text.includes('\0') ? text.replaceAll('\0', '\uFFFD') : text;
}

/**
 * Reads at most `limit` bytes of `stream` as UTF-8 (cut at a character boundary, NULs replaced:
 * see withoutNul), then drops the rest of it. With 'data' events
 * rather than an async iterator (a third of the cost per small answer: issue #11 bench profile).
 * Rejects with the stream's error (a timeout's abort, a reset).
 */
function readCapped(stream: Readable, limit: number): Promise<string> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    let settled = false;
    const finish = () => {
      if (settled) return;
      settled = true;
      // The usual short answer comes in one chunk: decoded in place, not copied first.
      const all = chunks.length === 1 ? chunks[0]! : Buffer.concat(chunks);
      let end = Math.min(all.length, limit);
      // Cut before a character the limit would split (its continuation bytes are 10xxxxxx), so
      // the kept text ends in whole characters and stays within the limit.
      while (end < all.length && end > 0 && (all[end]! & 0xc0) === 0x80) end--;
      resolve(withoutNul(all.toString('utf8', 0, end)));
    };
    stream.on('data', (chunk: Buffer) => {
      if (settled) return;
      chunks.push(chunk);
      size += chunk.length;
      if (size >= limit) {
        finish();
        stream.destroy();
      }
    });
    stream.once('end', finish);
    stream.on('error', (error) => {
      if (settled) return;
      settled = true;
      reject(error);
    });
  });
}

/** A short reason for a failed request (no stack, no secret: the URL's host at most). */
function describeError(error: unknown, timeoutSeconds: number): string {
  const err = error as { name?: string; code?: string; message?: string; cause?: { code?: string } };
  if (
    err?.name === 'TimeoutError' ||
    err?.code === 'UND_ERR_HEADERS_TIMEOUT' ||
    err?.code === 'UND_ERR_BODY_TIMEOUT' ||
    err?.code === 'UND_ERR_CONNECT_TIMEOUT'
  ) {
    return `No answer within ${timeoutSeconds} s`;
  }
  const code = err?.code ?? err?.cause?.code;
  if (code === 'ECONNREFUSED') return 'Connection refused';
  if (code === 'ENOTFOUND') return 'Host not found';
  if (code === 'ECONNRESET' || code === 'UND_ERR_SOCKET') return 'Connection reset';
  return withoutNul(err?.message ?? String(error));
}

const clients = new Map<string, WebhookClient>();

/** The process's client for `config` (one agent, hence one connection pool, per setting). */
export function webhookClientFor(config: {
  WEBHOOKS_ALLOW_PRIVATE: boolean;
  WEBHOOK_TIMEOUT_SECONDS: number;
}): WebhookClient {
  const key = `${config.WEBHOOKS_ALLOW_PRIVATE}:${config.WEBHOOK_TIMEOUT_SECONDS}`;
  let client = clients.get(key);
  if (!client) {
    client = new WebhookClient({
      policy: { allowPrivate: config.WEBHOOKS_ALLOW_PRIVATE },
      timeoutSeconds: config.WEBHOOK_TIMEOUT_SECONDS,
    });
    clients.set(key, client);
  }
  return client;
}
