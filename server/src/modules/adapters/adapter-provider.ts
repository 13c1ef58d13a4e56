import type { Config } from '../../config.ts';
import { createProvider, type EmailProvider, type ProviderCache } from '../../providers/index.ts';
import type { AdapterType } from './adapter-types.ts';
import type { AdapterRow } from './adapters.repository.ts';
import { adapterConfig } from './adapters.service.ts';

/**
 * The provider (connection pool) of `adapter`, from the context's `deps.providers` cache, keyed by
 * adapter id and updatedAt, built the same way for every caller (the email worker and invitation emails): at most
 * ADAPTER_MAX_CONNECTIONS connections, reaching only what the outbound policy allows
 * (SMTP_ALLOW_PRIVATE; issue #8). The config is decrypted only when the adapter is new to this
 * process or changed.
 * @throws ProviderError (permanent) for an invalid config or an unsupported type; a decrypt error.
 */
export function providerFor(
  deps: {
    providers: ProviderCache;
    encryptionKey: Buffer;
    config: Pick<Config, 'ADAPTER_MAX_CONNECTIONS' | 'SMTP_ALLOW_PRIVATE'>;
  },
  adapter: AdapterRow,
): EmailProvider {
  const { encryptionKey, config } = deps;
  return deps.providers.getOrCreate(adapter.id, adapter.updatedAt.toISOString(), () =>
    createProvider(adapter.type as AdapterType, adapterConfig(adapter, encryptionKey), {
      maxConnections: config.ADAPTER_MAX_CONNECTIONS,
      outbound: { allowPrivate: config.SMTP_ALLOW_PRIVATE },
    }),
  );
}
