import { LRUCache } from 'lru-cache';
import { type AdapterType, type CreateProviderOptions, createProvider } from './registry.ts';
import type { EmailProvider } from './types.ts';

export type {
  AdapterConfigField,
  ProviderContext,
  ProviderDefinition,
  ProviderEndpointVariable,
} from './definition.ts';
export { PROVIDER_ENDPOINT_VARIABLES } from './definition.ts';
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
export { ProviderError } from './types.ts';

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
    options: CreateProviderOptions = {},
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
