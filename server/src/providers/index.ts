import {
  ADAPTER_CONFIG_SCHEMAS,
  type AdapterConfig,
  type AdapterType,
} from '../modules/adapters/adapter-types.ts';
import type { OutboundPolicy } from '../outbound/index.ts';
import { createSmtpProvider } from './smtp.ts';
import { type EmailProvider, ProviderError } from './types.ts';

export { classifySmtpError, createSmtpProvider, SMTP_TIMEOUTS_MS } from './smtp.ts';

export type { EmailProvider, OutgoingAttachment, OutgoingEmail, SendResult } from './types.ts';
export { ProviderError } from './types.ts';

/** What a provider needs beyond its adapter's config. */
export interface ProviderOptions {
  /** Which addresses it may connect to (default: public only); from `SMTP_ALLOW_PRIVATE`. */
  outbound?: OutboundPolicy;
}

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
      return createSmtpProvider(
        parseProviderConfig(type, config),
        options.outbound ? { outbound: options.outbound } : {},
      );
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
 * Providers kept open between jobs, so the worker reuses one connection pool per adapter.
 * Keys are chosen by the caller and must change whenever the config does
 * (e.g. `${adapter.id}:${adapter.updatedAt.toISOString()}`); a stale entry is closed once it
 * is the least recently used beyond {@link MAX_CACHED_PROVIDERS}.
 */
export class ProviderCache {
  readonly #providers = new Map<string, { version: string; provider: EmailProvider }>();
  readonly #max: number;

  constructor(max = MAX_CACHED_PROVIDERS) {
    this.#max = max;
  }

  /**
   * The provider cached under `key` (an adapter id) for `version` (e.g. the adapter's updatedAt),
   * created with {@link createProvider} on first use. A new version replaces the entry and closes
   * the old provider, so a changed config never leaves a pool open with old credentials.
   * @throws ProviderError as {@link createProvider} does (nothing is cached then).
   */
  get(
    key: string,
    type: AdapterType,
    config: unknown,
    version = '',
    options: ProviderOptions = {},
  ): EmailProvider {
    const cached = this.#providers.get(key);
    if (cached) this.#providers.delete(key);
    if (cached?.version === version) {
      // Re-insert to mark as most recently used (Map keeps insertion order).
      this.#providers.set(key, cached);
      return cached.provider;
    }
    if (cached) void cached.provider.close().catch(() => {});
    const provider = createProvider(type, config, options);
    this.#providers.set(key, { version, provider });
    if (this.#providers.size > this.#max) {
      const [oldestKey, oldest] = this.#providers.entries().next().value as [
        string,
        { provider: EmailProvider },
      ];
      this.#providers.delete(oldestKey);
      void oldest.provider.close().catch(() => {});
    }
    return provider;
  }

  /** Number of providers held. */
  get size(): number {
    return this.#providers.size;
  }

  /** Closes and forgets every cached provider (worker shutdown). */
  async closeAll(): Promise<void> {
    const entries = [...this.#providers.values()];
    this.#providers.clear();
    await Promise.allSettled(entries.map((entry) => entry.provider.close()));
  }
}

const defaultCache = new ProviderCache();

/** {@link ProviderCache.get} on the process-wide cache the worker uses. */
export function getProvider(
  key: string,
  type: AdapterType,
  config: unknown,
  version = '',
  options: ProviderOptions = {},
): EmailProvider {
  return defaultCache.get(key, type, config, version, options);
}

/** {@link ProviderCache.closeAll} on the process-wide cache; call on shutdown. */
export function closeAllProviders(): Promise<void> {
  return defaultCache.closeAll();
}
