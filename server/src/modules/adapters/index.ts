export { ADAPTER_TYPES, type AdapterType } from './adapter-types.ts';
export type { AdapterRow } from './adapters.repository.ts';
export { adapterRoutes } from './adapters.routes.ts';
export {
  adapterConfig,
  findAdapter,
  findAdapters,
  resolveSendingAdapter,
  upgradeLegacyAdapterConfigs,
} from './adapters.service.ts';
