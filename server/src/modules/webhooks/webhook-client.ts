import { isIP } from 'node:net';
import type { Agent, Dispatcher } from 'undici';
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
 * One attempt's response, read as undici's dispatch handler (DispatchHandler, undici 7): the status,
 * and the body up to `limit` bytes (see cappedText); the request is aborted once that much came,
 * or at the attempt's deadline. Not undici's `request()`, which wraps every response in a Readable
 * stream, an async resource, a promise and an abort listener: 20-24 µs of CPU a request against
 * 28-37 on this machine (issue #11 bench, 100 in flight to a local receiver).
 */
class CappedResponse implements Dispatcher.DispatchHandler {
  readonly #limit: number;
  readonly #resolve: (response: { status: number; body: string }) => void;
  readonly #reject: (error: unknown) => void;
  #controller: Dispatcher.DispatchController | undefined;
  #status = 0;
  readonly #chunks: Buffer[] = [];
  #size = 0;
  #settled = false;
  /** Why the attempt was ended before undici started it (its deadline), if it was. */
  #abortReason: Error | undefined;
  /** Called once the attempt settles (its deadline window lets go of it). */
  onSettled: (() => void) | undefined;

  constructor(
    limit: number,
    resolve: (response: { status: number; body: string }) => void,
    reject: (error: unknown) => void,
  ) {
    this.#limit = limit;
    this.#resolve = resolve;
    this.#reject = reject;
  }

  /** Ends the attempt with `reason` (its deadline): aborts the request, rejects its answer. */
  abort(reason: Error): void {
    if (this.#settled) return;
    if (this.#controller) this.#controller.abort(reason);
    else this.#abortReason = reason;
    this.#fail(reason);
  }

  onRequestStart(controller: Dispatcher.DispatchController): void {
    this.#controller = controller;
    if (this.#abortReason) controller.abort(this.#abortReason);
  }

  onResponseStart(_controller: Dispatcher.DispatchController, statusCode: number): void {
    // 1xx informational answers come before the final one.
    if (statusCode >= 200) this.#status = statusCode;
  }

  onResponseData(controller: Dispatcher.DispatchController, chunk: Buffer): void {
    if (this.#settled) return;
    this.#chunks.push(chunk);
    this.#size += chunk.length;
    if (this.#size >= this.#limit) {
      this.#succeed();
      // The rest is not read: the connection is dropped rather than drained.
      controller.abort(new Error('Response body over the kept size'));
    }
  }

  onResponseEnd(): void {
    this.#succeed();
  }

  onResponseError(_controller: Dispatcher.DispatchController, error: Error): void {
    this.#fail(error);
  }

  #succeed(): void {
    if (this.#settled) return;
    this.#settled = true;
    this.onSettled?.();
    this.#resolve({ status: this.#status, body: cappedText(this.#chunks, this.#limit) });
  }

  #fail(error: unknown): void {
    if (this.#settled) return;
    this.#settled = true;
    this.onSettled?.();
    this.#reject(error);
  }
}

/**
 * The deadlines of attempts: attempts starting within one window share one timer (a timer per
 * attempt cost its own bookkeeping, issue #11 bench profile), which ends those of them still
 * unsettled. A window's timer fires `timeoutMs` after the window closes: every attempt gets at
 * least its `timeoutMs`, and at most one window more.
 */
class DeadlineWindows {
  readonly #timeoutMs: number;
  readonly #windowMs: number;
  #current: { attempts: Set<CappedResponse>; closes: number } | undefined;
  /** Timers started so far (one per window with attempts; for tests and diagnostics). */
  timers = 0;

  constructor(timeoutMs: number) {
    this.#timeoutMs = timeoutMs;
    // 100 ms at the usual 30 s; a twentieth of a short test timeout.
    this.#windowMs = Math.max(1, Math.min(100, Math.floor(timeoutMs / 20)));
  }

  /** Puts `attempt`, starting now, under the deadline of the current window. */
  track(attempt: CappedResponse): void {
    const now = performance.now();
    let window = this.#current;
    if (!window || now > window.closes) {
      const attempts = new Set<CappedResponse>();
      window = { attempts, closes: now + this.#windowMs };
      this.#current = window;
      this.timers++;
      const seconds = this.#timeoutMs / 1000;
      setTimeout(() => {
        const reason = new DOMException(`No answer within ${seconds} s`, 'TimeoutError');
        for (const pending of attempts) pending.abort(reason);
      }, this.#timeoutMs + this.#windowMs).unref();
    }
    const { attempts } = window;
    attempts.add(attempt);
    attempt.onSettled = () => attempts.delete(attempt);
  }
}

/**
 * The HTTP client of webhook deliveries (issue #11): POSTs a signed JSON body, with an overall
 * deadline, no redirects followed (undici's `request` follows none: a 3xx is a failed attempt),
 * https only in production, the SSRF guard on every connection's resolved address (an IP-literal
 * host on every request), and the response body read up to 2 KB only.
 */
export class WebhookClient {
  /** undici's agent, imported on the first delivery: an idle server never loads it (issue #9 idle memory). */
  #agent: Promise<Agent> | undefined;
  readonly #lookup: ReturnType<typeof webhookLookup>;
  readonly #policy: OutboundPolicy;
  readonly #timeoutMs: number;
  readonly #deadlines: DeadlineWindows;
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
    this.#deadlines = new DeadlineWindows(this.#timeoutMs);
    this.#lookup = webhookLookup(options.policy, options.resolve);
  }

  #undici(): Promise<Agent> {
    this.#agent ??= import('undici').then(
      ({ Agent }) =>
        new Agent({
          connect: { lookup: this.#lookup, timeout: this.#timeoutMs },
          headersTimeout: this.#timeoutMs,
          bodyTimeout: this.#timeoutMs,
          connections: CONNECTIONS_PER_ORIGIN,
        }),
    );
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
      const agent = await this.#undici();
      const destination = target.url;
      const { status, body: responseBody } = await new Promise<{ status: number; body: string }>(
        (resolve, reject) => {
          const response = new CappedResponse(RESPONSE_BODY_LIMIT_BYTES, resolve, reject);
          this.#deadlines.track(response);
          agent.dispatch(
            {
              origin: destination.origin,
              path: `${destination.pathname}${destination.search}`,
              method: 'POST',
              headers: {
                'content-type': 'application/json',
                'user-agent': 'Postwright-Webhooks/1',
                ...headers,
              },
              body,
            },
            response,
          );
        },
      );
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
    if (this.#agent) await (await this.#agent).close();
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
 * The first `limit` bytes of `chunks` as UTF-8, cut at a character boundary (never half a
 * multi-byte character), NULs replaced (see withoutNul).
 */
function cappedText(chunks: readonly Buffer[], limit: number): string {
  // The usual short answer comes in one chunk: decoded in place, not copied first.
  const all = chunks.length === 1 ? chunks[0]! : Buffer.concat(chunks);
  let end = Math.min(all.length, limit);
  // Cut before a character the limit would split (its continuation bytes are 10xxxxxx), so the
  // kept text ends in whole characters and stays within the limit.
  while (end < all.length && end > 0 && (all[end]! & 0xc0) === 0x80) end--;
  return withoutNul(all.toString('utf8', 0, end));
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
