import { AppError } from '../../http/errors.ts';
import {
  type AdapterConfig,
  type AdapterType,
  ProviderConfigError,
  parseProviderConfig,
} from '../../providers/index.ts';

/**
 * Adapter config validation with the API's error shape. The types, their schemas and their form
 * descriptors are the providers' (providers/registry.ts, one definition per provider file); this
 * module only turns the registry's ProviderConfigError into the spec's error envelope.
 */
export {
  ADAPTER_TYPE_DESCRIPTORS,
  ADAPTER_TYPES,
  type AdapterConfig,
  type AdapterConfigField,
  type AdapterType,
  type AdapterTypeDescriptor,
  isAdapterType,
  MAILAPI_CLOUD_REGIONS,
  MAILAPI_DOMAIN_REGIONS,
  SMTP_TLS_MODES,
  type SmtpConfig,
} from '../../providers/index.ts';

/**
 * Validates an adapter's `config` against its type's schema (providers/registry.ts
 * parseProviderConfig, the one validation).
 * @returns the typed config with defaults applied (e.g. `region: 'us'` for `mailapi_domain`).
 * @throws AppError VALIDATION_ERROR 'Invalid adapter config' with
 *   `details.issues = [{path, message}]`; paths start with `config.` (e.g. `config.port`, or
 *   `config.foo` for an unknown key), or are `type` when the type itself is unknown.
 */
export function parseAdapterConfig<T extends AdapterType>(type: T, config: unknown): AdapterConfig<T> {
  try {
    return parseProviderConfig(type, config);
  } catch (error) {
    if (error instanceof ProviderConfigError) {
      throw new AppError('VALIDATION_ERROR', 'Invalid adapter config', { issues: error.issues });
    }
    throw error;
  }
}
