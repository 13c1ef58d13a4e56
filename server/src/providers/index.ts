import { LRUCache } from 'lru-cache';
import { ADAPTER_CONFIG_SCHEMAS, type AdapterConfig, type AdapterType } from './provider-configs.ts';
import { createSmtpProvider } from './smtp.ts';
import { type EmailProvider, ProviderError, type ProviderOptions } from './types.ts';

export { SendSlots } from './send-slots.ts';
export { classifySmtpError, createSmtpProvider, SMTP_TIMEOUTS_MS } from './smtp.ts';
export type {
  EmailProvider,
  OutgoingAttachment,
  OutgoingEmail,
  ProviderOptions,
  SendOptions,
  SendResult,
} from './types.ts';
export { ProviderError } from './types.ts';

/**
 * Creates the provider for one adapter. `config` is the decrypted adapter config; it is
 * validated again here against the type's schema (spec, "Adapter"), since rows outlive code.
 * `options.outbound` is the outbound policy its connections obey (public addresses only when omitted).
 * @throws ProviderError (permanent) for an invalid config or a type not implemented yet
 *   (`mailapi_a`, `mailapi_b`, `mailapi_domain`, `mailapi_cloud`, `mailapi_server`).
 */
export function createProvider(
  type: AdapterType,
  config: unknown,
  options: ProviderOptions = {},
): EmailProvider {
  switch (type) {
    case 'smtp':
      return createSmtpProvider(parseProviderConfig(type, config), {
        ...(options.outbound ? { outbound: options.outbound } : {}),
        ...(options.maxConnections ? { maxConnections: options.maxConnections } : {}),
      });
    case 'mailapi_a':
    case 'mailapi_b':
    case 'mailapi_domain':
    case 'mailapi_cloud':
    case 'mailapi_server':
      throw new ProviderError(`Adapter type ${type} is not supported yet`, { permanent: true });
    default:
      throw new ProviderError(`Unknown adapter type ${String(type)}`, { permanent: true });
  }
}

/** Validates a stored config; a row that no longer fits its schema cannot be sent with. */
function parseProviderConfig<T extends AdapterType>(type: T, config: unknown): AdapterConfig<T> {
  const parsed = ADAPTER_CONFIG_SCHEMAS[type].safeParse(config);
  if (!parsed.success) {
    const fields = parsed.error.issues.map((issue) => issue.path.join('.') || '(root)').join(', ');
    throw new ProviderError(`Invalid ${type} adapter config: ${fields}`, {
      permanent: true,
      providerCode: 'ECONFIG',
    });
  }
  return parsed.data as AdapterConfig<T>;
}

/** Most providers kept open at once; the least recently used one beyond it is closed. */
const MAX_CACHED_PROVIDERS = 100;

/**
 * Providers kept open between jobs, so the worker reuses one connection pool per adapter; one per
 * context (server/src/context.ts), closed with it
 * (lru-cache, https://github.com/isaacs/node-lru-cache). An entry is keyed by the adapter id and
 * carries a version (the adapter's updatedAt): a new version replaces the entry, and a replaced,
 * evicted or cleared provider is closed, so a changed config never leaves a pool open with old
 * credentials.
 */
export class ProviderCache {
  readonly #providers: LRUCache<string, { version: string; provider: EmailProvider }>;
  readonly #closing = new Set<Promise<void>>();

  constructor(max = MAX_CACHED_PROVIDERS) {
    this.#providers = new LRUCache({
      max,
      dispose: (entry) => {
        const closing = entry.provider.close().catch(() => {});
        this.#closing.add(closing);
        void closing.finally(() => this.#closing.delete(closing));
      },
    });
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
    const provider = create();
    this.#providers.set(key, { version, provider });
    return provider;
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
    options: ProviderOptions = {},
  ): EmailProvider {
    return this.getOrCreate(key, version, () => createProvider(type, config, options));
  }

  /** Number of providers held. */
  get size(): number {
    return this.#providers.size;
  }

  /** Closes and forgets every cached provider (worker shutdown); resolves once all are closed. */
  async closeAll(): Promise<void> {
    this.#providers.clear();
    await Promise.all([...this.#closing]);
  }
}
