import type { Config } from '../../config.ts';
import {
  createProvider,
  type EmailProvider,
  PROVIDER_ENDPOINT_VARIABLES,
  type ProviderCache,
  type ProviderEndpointVariable,
} from '../../providers/index.ts';
import { decryptConfig } from './adapter-crypto.ts';
import type { AdapterType } from './adapter-types.ts';
import type { AdapterRow } from './adapters.repository.ts';

/**
 * The decrypted config of an adapter row (AES-256-GCM at rest, bound to the row's team and id).
 * @throws ConfigDecryptionError when the stored text was not written for this row (or is damaged).
 */
export function adapterConfig(row: AdapterRow, encryptionKey: Buffer): Record<string, unknown> {
  return decryptConfig(encryptionKey, row.configEncrypted, {
    teamId: row.teamId,
    adapterId: row.id,
  }) as Record<string, unknown>;
}

/**
 * The settings {@link providerFor} reads: ADAPTER_MAX_CONNECTIONS, SMTP_ALLOW_PRIVATE and the
 * operator's PROVIDER_ENDPOINT_* base-URL overrides (unset = each provider's public API).
 */
export type ProviderSettings = Pick<
  Config,
  'ADAPTER_MAX_CONNECTIONS' | 'SMTP_ALLOW_PRIVATE' | 'SEND_TIMEOUT_SECONDS'
> &
  Partial<Pick<Config, ProviderEndpointVariable>>;

/** What {@link providerFor} needs from the context (server/src/context.ts). */
export interface ProviderDeps {
  /** The context's open providers, keyed by adapter id and updatedAt. */
  providers: ProviderCache;
  encryptionKey: Buffer;
  config: ProviderSettings;
}

/**
 * The provider (connection pool / SDK client) of `adapter`, from the context's provider cache keyed
 * by adapter id and updatedAt, built the same way for every caller (the email worker, the adapter
 * test and invitation emails): at most ADAPTER_MAX_CONNECTIONS connections, reaching only what the
 * outbound policy allows (SMTP_ALLOW_PRIVATE; issue #8), at the operator's PROVIDER_ENDPOINT_* for
 * its type when set (issue #10). The config is decrypted only when the adapter is new to this
 * context or changed: a cache hit never decrypts.
 * @throws ProviderError (permanent; ProviderConfigError for an invalid stored config); a decrypt error.
 */
export function providerFor(deps: ProviderDeps, adapter: AdapterRow): EmailProvider {
  const { encryptionKey, config } = deps;
  return deps.providers.getOrCreate(adapter.id, adapter.updatedAt.toISOString(), () =>
    createProvider(adapter.type as AdapterType, adapterConfig(adapter, encryptionKey), {
      maxConnections: config.ADAPTER_MAX_CONNECTIONS,
      requestTimeoutMs: (config.SEND_TIMEOUT_SECONDS + 1) * 1000,
      outbound: { allowPrivate: config.SMTP_ALLOW_PRIVATE },
      endpoints: Object.fromEntries(PROVIDER_ENDPOINT_VARIABLES.map((name) => [name, config[name]])),
    }),
  );
}
