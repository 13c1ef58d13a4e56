import { z } from 'zod';

/**
 * Adapter types and their config schemas, exactly as the spec's "Adapter" section lists them
 * (interface-spec.md, "Adapter types and their `config` fields"): what each provider needs to be
 * built. They live with the providers so that the adapters module depends on providers and not
 * the reverse (issue #9, "Dependencies point one way"); the adapters module re-exports them with
 * its validation and form descriptors (modules/adapters/adapter-types.ts).
 */

/** The six adapter type ids (spec, "Adapter"), each one provider kind. */
export const ADAPTER_TYPES = [
  'mailapi_a',
  'mailapi_b',
  'mailapi_domain',
  'mailapi_cloud',
  'mailapi_server',
  'smtp',
] as const;

export type AdapterType = (typeof ADAPTER_TYPES)[number];

/** Regions a `mailapi_domain` account lives in; `us` when omitted (spec). */
export const MAILAPI_DOMAIN_REGIONS = ['us', 'eu'] as const;

/** Regions a `mailapi_cloud` adapter may name (spec). */
export const MAILAPI_CLOUD_REGIONS = [
  'us-east-1',
  'us-west-2',
  'eu-west-1',
  'eu-central-1',
  'ap-south-1',
  'ap-southeast-2',
] as const;

const requiredString = z.string().min(1);

/**
 * How an `smtp` adapter uses TLS besides `secure` (issue #8): `auto` (the default when omitted)
 * upgrades with STARTTLS when offered, and insists on it whenever credentials are set, so a
 * man-in-the-middle who strips STARTTLS cannot read the AUTH exchange; `none` never uses TLS and
 * sends credentials in plaintext (lab servers only).
 */
export const SMTP_TLS_MODES = ['auto', 'none'] as const;

/**
 * `smtp`: host, port 1-65535, optional secure (TLS from the first byte), optional credentials
 * (spec, "Adapter"), and the optional `tls` mode ({@link SMTP_TLS_MODES}; not in the spec's list,
 * added by issue #8). `secure: true` with `tls: "none"` contradicts itself and is refused.
 */
export const smtpConfigSchema = z
  .strictObject({
    host: requiredString,
    port: z.number().int().min(1).max(65535),
    secure: z.boolean().optional(),
    username: z.string().optional(),
    password: z.string().optional(),
    tls: z.enum(SMTP_TLS_MODES).optional(),
  })
  .refine((config) => !(config.secure === true && config.tls === 'none'), {
    path: ['tls'],
    message: '"none" cannot be combined with secure: true (TLS from the first byte)',
  });

export const mailapiAConfigSchema = z.strictObject({ apiKey: requiredString });

export const mailapiBConfigSchema = z.strictObject({ apiKey: requiredString });

export const mailapiDomainConfigSchema = z.strictObject({
  apiKey: requiredString,
  domain: requiredString,
  region: z.enum(MAILAPI_DOMAIN_REGIONS).default('us'),
});

export const mailapiCloudConfigSchema = z.strictObject({
  accessKeyId: requiredString,
  secretAccessKey: requiredString,
  region: z.enum(MAILAPI_CLOUD_REGIONS),
});

export const mailapiServerConfigSchema = z.strictObject({ serverToken: requiredString });

/** The config schema of each adapter type; unknown keys are rejected. */
export const ADAPTER_CONFIG_SCHEMAS = {
  mailapi_a: mailapiAConfigSchema,
  mailapi_b: mailapiBConfigSchema,
  mailapi_domain: mailapiDomainConfigSchema,
  mailapi_cloud: mailapiCloudConfigSchema,
  mailapi_server: mailapiServerConfigSchema,
  smtp: smtpConfigSchema,
} as const satisfies Record<AdapterType, z.ZodObject>;

/** The parsed config of adapter type `T` (defaults applied). */
export type AdapterConfig<T extends AdapterType = AdapterType> = z.output<(typeof ADAPTER_CONFIG_SCHEMAS)[T]>;

export type SmtpConfig = AdapterConfig<'smtp'>;
export type MailapiAConfig = AdapterConfig<'mailapi_a'>;
export type MailapiBConfig = AdapterConfig<'mailapi_b'>;
export type MailapiDomainConfig = AdapterConfig<'mailapi_domain'>;
export type MailapiCloudConfig = AdapterConfig<'mailapi_cloud'>;
export type MailapiServerConfig = AdapterConfig<'mailapi_server'>;

/** True when `value` is one of {@link ADAPTER_TYPES}. */
export function isAdapterType(value: unknown): value is AdapterType {
  return typeof value === 'string' && (ADAPTER_TYPES as readonly string[]).includes(value);
}
