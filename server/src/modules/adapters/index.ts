export { ConfigDecryptionError, decryptConfig, encryptConfig } from './adapter-crypto.ts';
export { adapterEventsUrl, isAdapterEventsToken } from './adapter-events-url.ts';
export { type ProviderDeps, type ProviderSettings, providerFor } from './adapter-provider.ts';
export { ADAPTER_TYPES, type AdapterType } from './adapter-types.ts';
export type { AdapterRow } from './adapters.repository.ts';
export { adapterRoutes } from './adapters.routes.ts';
export {
  ADAPTER_SEND_CACHE_TTL_MS,
  type AdapterSendCache,
  createAdapterSendCache,
} from './adapters.send-cache.ts';
export {
  adapterConfig,
  cachedSendingAdapter,
  findAdapter,
  findAdapterById,
  findAdapters,
  resolveSendingAdapter,
  upgradeLegacyAdapterConfigs,
} from './adapters.service.ts';
