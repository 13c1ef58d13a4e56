import { LRUCache } from 'lru-cache';
import { type AdapterType, type CreateProviderOptions, createProvider } from './registry.ts';
import { type EmailProvider, ProviderError } from './types.ts';

export type {
  AdapterConfigField,
  ProviderContext,
  ProviderDefinition,
  ProviderEndpointVariable,
} from './definition.ts';
export { estimatedMessageBytes, PROVIDER_ENDPOINT_VARIABLES } from './definition.ts';
export { MAILAPI_DOMAIN_REGIONS } from './mailgun.ts';
export {
  ADAPTER_TYPE_DESCRIPTORS,
  ADAPTER_TYPES,
  type AdapterConfig,
  type AdapterType,
  type AdapterTypeDescriptor,
  type ConfigIssue,
  type CreateProviderOptions,
  createProvider,
  isAdapterType,
  maxMessageBytesOf,
  PROVIDERS,
  ProviderConfigError,
  parseProviderConfig,
} from './registry.ts';
export { SendSlots } from './send-slots.ts';
export { MAILAPI_CLOUD_REGIONS } from './ses.ts';
export {
  classifySmtpError,
  createSmtpProvider,
  SMTP_TIMEOUTS_MS,
  SMTP_TLS_MODES,
  type SmtpConfig,
  smtpConfigSchema,
} from './smtp.ts';
export type {
  EmailProvider,
  OutgoingAttachment,
  OutgoingEmail,
  RefusedRecipient,
  SendOptions,
  SendResult,
} from './types.ts';
export { type EmailTags, hasTags, isTagList, ProviderError } from './types.ts';

/** Most providers kept open at once; the least recently used one beyond it is closed. */
const MAX_CACHED_PROVIDERS = 100;

/** How long a replaced provider waits for its sends in flight before it is closed anyway (ms). */
const DEFAULT_DRAIN_MS = 90_000;

/** One cached provider: what callers get (sends counted), what it wraps, and its sends in flight. */
interface CacheEntry {
  key: string;
  version: string;
  /** Makes the provider again (a caller holding this entry after its eviction sends through a new one). */
  create: () => EmailProvider;
  provider: EmailProvider;
  inner: EmailProvider;
  sends: number;
  retired: boolean;
  /** Retired for space (least recently used), not because its adapter changed. */
  evicted: boolean;
  onDrained?: () => void;
}

/**
 * Providers kept open between jobs, so the worker reuses one connection pool per adapter; one per
 * context (server/src/context.ts), closed with it
 * (lru-cache, https://github.com/isaacs/node-lru-cache). An entry is keyed by the adapter id and
 * carries a version (the adapter's updatedAt): a new version replaces the entry, and a replaced or
 * evicted provider is closed, so a changed config never leaves a pool open with old credentials.
 * A replaced provider refuses new sends at once (transient: the retry takes the new version); one
 * evicted for space hands a new send from a caller still holding it to the provider cached now for
 * the same version (made again when none is), since nothing about its adapter changed: an email
 * that took its provider and then waited for a connection slot while other adapters' emails went
 * out failed "Provider closed" once a worker used more than `max` adapters (review finding, session
 * 18). Either is closed only once its sends in flight have settled, or after `drainMs`: closing
 * cut requests a provider was still answering, and the cut send was retried and delivered twice
 * (review finding, session 15: an adapter renamed while an email was in flight).
 */
export class ProviderCache {
  readonly #providers: LRUCache<string, CacheEntry>;
  readonly #closing = new Set<Promise<void>>();
  readonly #draining = new Set<CacheEntry>();
  readonly #drainMs: number;
  #closed = false;

  /**
   * @param max providers kept open at once (least recently used closed beyond it).
   * @param drainMs how long a replaced provider's sends in flight may take before it is closed
   *   anyway (ms; context.ts passes SEND_TIMEOUT_SECONDS plus a margin).
   */
  constructor(max = MAX_CACHED_PROVIDERS, drainMs = DEFAULT_DRAIN_MS) {
    this.#drainMs = drainMs;
    this.#providers = new LRUCache({
      max,
      dispose: (entry, _key, reason) => this.#retire(entry, reason === 'evict'),
    });
  }

  #retire(entry: CacheEntry, evicted: boolean): void {
    entry.retired = true;
    entry.evicted = evicted;
    const drained =
      entry.sends === 0
        ? Promise.resolve()
        : new Promise<void>((resolve) => {
            this.#draining.add(entry);
            const timer = setTimeout(resolve, this.#drainMs);
            timer.unref();
            entry.onDrained = () => {
              clearTimeout(timer);
              resolve();
            };
          });
    // With nothing in flight the provider is closed now (its close starts synchronously).
    const closing = (entry.sends === 0 ? entry.inner.close() : drained.then(() => entry.inner.close()))
      .catch(() => {})
      .finally(() => this.#draining.delete(entry));
    this.#closing.add(closing);
    void closing.finally(() => this.#closing.delete(closing));
  }

  /**
   * The provider a caller still holding `entry` after its eviction sends through: the one cached now
   * for the same version, or a new one; undefined when the adapter changed meanwhile (another
   * version is cached) or the cache is closed.
   */
  #successorOf(entry: CacheEntry): EmailProvider | undefined {
    if (!entry.evicted || this.#closed) return undefined;
    const current = this.#providers.peek(entry.key);
    if (current && current.version !== entry.version) return undefined;
    return this.getOrCreate(entry.key, entry.version, entry.create);
  }

  #track(key: string, version: string, create: () => EmailProvider): CacheEntry {
    const inner = create();
    const entry: CacheEntry = {
      key,
      version,
      create,
      inner,
      sends: 0,
      retired: false,
      evicted: false,
      provider: inner,
    };
    const successorOf = (retired: CacheEntry) => this.#successorOf(retired);
    entry.provider = {
      async send(email, options) {
        if (entry.retired) {
          const successor = successorOf(entry);
          if (successor) return successor.send(email, options);
          throw new ProviderError('Provider closed: its adapter changed', { permanent: false });
        }
        entry.sends += 1;
        let background: Promise<void> | undefined;
        const done = () => {
          entry.sends -= 1;
          if (entry.sends === 0) entry.onDrained?.();
        };
        try {
          return await inner.send(email, options);
        } catch (error) {
          // Given up while its request goes on: in flight until that request ends.
          if (error instanceof ProviderError) background = error.settled;
          throw error;
        } finally {
          if (background) void background.finally(done);
          else done();
        }
      },
      verify: () => inner.verify(),
      close: () => inner.close(),
    };
    return entry;
  }

  /**
   * The provider cached under `key` for `version`, or the one `create` makes (then cached).
   * `create` runs only on a miss, so a caller can put costly work (decrypting the adapter config)
   * in it.
   * @throws whatever `create` throws (nothing is cached then).
   */
  getOrCreate(key: string, version: string, create: () => EmailProvider): EmailProvider {
    const cached = this.#providers.get(key);
    if (cached?.version === version) return cached.provider;
    // A stale version is closed even when its replacement cannot be created.
    if (cached) this.#providers.delete(key);
    const entry = this.#track(key, version, create);
    this.#providers.set(key, entry);
    return entry.provider;
  }

  /**
   * The provider cached under `key` (an adapter id) for `version` (e.g. the adapter's updatedAt),
   * created with {@link createProvider} on first use.
   * @throws ProviderError as {@link createProvider} does (nothing is cached then).
   */
  get(
    key: string,
    type: AdapterType,
    config: unknown,
    version = '',
    options: CreateProviderOptions = {},
  ): EmailProvider {
    return this.getOrCreate(key, version, () => createProvider(type, config, options));
  }

  /** Number of providers held. */
  get size(): number {
    return this.#providers.size;
  }

  /**
   * Closes and forgets every cached provider (worker shutdown, after the worker's jobs settled);
   * providers still draining are closed now too. Resolves once all are closed.
   */
  async closeAll(): Promise<void> {
    this.#closed = true;
    this.#providers.clear();
    for (const entry of this.#draining) entry.onDrained?.();
    await Promise.all([...this.#closing]);
  }
}
