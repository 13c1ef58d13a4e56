import { z } from 'zod';
import { AppError, type ValidationIssue } from '../../http/errors.ts';
import {
  ADAPTER_CONFIG_SCHEMAS,
  ADAPTER_TYPES,
  type AdapterConfig,
  type AdapterType,
  isAdapterType,
} from '../../providers/provider-configs.ts';

/**
 * Adapter config validation (with the API's error shape) and the descriptors the dashboard builds
 * its forms from (`GET /api/adapters/types`). The types and schemas themselves are the providers'
 * (providers/provider-configs.ts), re-exported here for the module.
 */
export {
  ADAPTER_CONFIG_SCHEMAS,
  ADAPTER_TYPES,
  type AdapterConfig,
  type AdapterType,
  isAdapterType,
  MAILAPI_CLOUD_REGIONS,
  MAILAPI_DOMAIN_REGIONS,
  type MailapiAConfig,
  type MailapiBConfig,
  type MailapiCloudConfig,
  type MailapiDomainConfig,
  type MailapiServerConfig,
  mailapiAConfigSchema,
  mailapiBConfigSchema,
  mailapiCloudConfigSchema,
  mailapiDomainConfigSchema,
  mailapiServerConfigSchema,
  SMTP_TLS_MODES,
  type SmtpConfig,
  smtpConfigSchema,
} from '../../providers/provider-configs.ts';

/**
 * Validates an adapter's `config` against its type's schema.
 * @returns the typed config with defaults applied (e.g. `region: 'us'` for `mailapi_domain`).
 * @throws AppError VALIDATION_ERROR 'Invalid adapter config' with
 *   `details.issues = [{path, message}]`; paths start with `config.` (e.g. `config.port`, or
 *   `config.foo` for an unknown key), or are `type` when the type itself is unknown.
 */
export function parseAdapterConfig<T extends AdapterType>(type: T, config: unknown): AdapterConfig<T> {
  if (!isAdapterType(type)) {
    throw new AppError('VALIDATION_ERROR', 'Invalid adapter config', {
      issues: [
        { path: 'type', message: `Unknown adapter type; expected one of ${ADAPTER_TYPES.join(', ')}` },
      ],
    });
  }
  const result = ADAPTER_CONFIG_SCHEMAS[type].safeParse(config, {
    error: (issue) => (issue.code === 'invalid_type' && issue.input === undefined ? 'Required' : undefined),
  });
  if (!result.success) {
    throw new AppError('VALIDATION_ERROR', 'Invalid adapter config', { issues: toIssues(result.error) });
  }
  return result.data as AdapterConfig<T>;
}

/** Flattens zod issues to `{path, message}`, one issue per unknown key. */
function toIssues(error: z.ZodError): ValidationIssue[] {
  return error.issues.flatMap((issue) => {
    const base = ['config', ...issue.path.map(String)];
    if (issue.code === 'unrecognized_keys') {
      return issue.keys.map((key) => ({ path: [...base, key].join('.'), message: 'Unknown field' }));
    }
    return [{ path: base.join('.'), message: issue.message }];
  });
}

/** One form field of an adapter type (spec: "Adapter type descriptor"). */
export interface AdapterConfigField {
  name: string;
  label: string;
  type: 'text' | 'password' | 'number' | 'boolean' | 'select';
  required: boolean;
  placeholder: string;
  /** The allowed values of a `select` field, in display order. */
  options?: string[];
}

/** What `GET /api/adapters/types` returns per type (spec: "Adapter type descriptor"). */
export interface AdapterTypeDescriptor {
  type: AdapterType;
  name: string;
  description: string;
  configFields: AdapterConfigField[];
}

type FieldSpec = Omit<AdapterConfigField, 'name' | 'required' | 'options'>;

/**
 * Builds a descriptor whose `required` flags and `select` options come from the type's schema,
 * so the form can never disagree with what {@link parseAdapterConfig} accepts.
 */
function describe<T extends AdapterType>(
  type: T,
  name: string,
  description: string,
  fields: { [K in keyof (typeof ADAPTER_CONFIG_SCHEMAS)[T]['shape']]: FieldSpec },
): AdapterTypeDescriptor {
  const shape: Record<string, z.ZodType> = ADAPTER_CONFIG_SCHEMAS[type].shape;
  const configFields = Object.entries(fields as Record<string, FieldSpec>).map(([key, field]) => {
    const schema = shape[key];
    if (!schema) throw new Error(`Descriptor field ${type}.${key} is not in the schema`);
    const required = !schema.safeParse(undefined).success;
    const values = enumValues(schema);
    const described: AdapterConfigField = { name: key, ...field, required };
    if (values) described.options = [...values];
    return described;
  });
  return { type, name, description, configFields };
}

/** The values of an enum schema, seen through `.optional()` / `.default()`; undefined otherwise. */
function enumValues(schema: z.ZodType): string[] | undefined {
  let inner: z.ZodType = schema;
  while (inner instanceof z.ZodOptional || inner instanceof z.ZodDefault) {
    inner = inner.unwrap() as z.ZodType;
  }
  return inner instanceof z.ZodEnum ? (inner.options as string[]) : undefined;
}

/** Every adapter type with its form fields, in {@link ADAPTER_TYPES} order. */
export const ADAPTER_TYPE_DESCRIPTORS: AdapterTypeDescriptor[] = [
  describe('mailapi_a', 'Resend', 'Resend: hosted email sending API, authenticated with an API key.', {
    apiKey: { label: 'API key', type: 'password', placeholder: 're_...' },
  }),
  describe(
    'mailapi_b',
    'SendGrid',
    'SendGrid (Twilio): hosted email sending API, authenticated with an API key.',
    {
      apiKey: { label: 'API key', type: 'password', placeholder: 'SG....' },
    },
  ),
  describe(
    'mailapi_domain',
    'Mailgun',
    'Mailgun: hosted email API that sends from a verified sending domain, in its US or EU region.',
    {
      apiKey: { label: 'API key', type: 'password', placeholder: 'key-...' },
      domain: { label: 'Sending domain', type: 'text', placeholder: 'mg.example.com' },
      region: { label: 'Region', type: 'select', placeholder: 'us' },
    },
  ),
  describe(
    'mailapi_cloud',
    'Amazon SES',
    'Amazon Simple Email Service: cloud mail service, authenticated with IAM access keys in one AWS region.',
    {
      accessKeyId: { label: 'Access key ID', type: 'text', placeholder: 'AKIA...' },
      secretAccessKey: {
        label: 'Secret access key',
        type: 'password',
        placeholder: 'Secret access key',
      },
      region: { label: 'Region', type: 'select', placeholder: 'us-east-1' },
    },
  ),
  describe(
    'mailapi_server',
    'Postmark',
    'Postmark: transactional mail service, authenticated with a server API token.',
    {
      serverToken: {
        label: 'Server API token',
        type: 'password',
        placeholder: '00000000-0000-0000-0000-000000000000',
      },
    },
  ),
  describe('smtp', 'SMTP', 'Any SMTP server or relay (your own mail server or a provider’s SMTP endpoint).', {
    host: { label: 'Host', type: 'text', placeholder: 'smtp.example.com' },
    port: { label: 'Port', type: 'number', placeholder: '587 (STARTTLS), 465 (TLS) or 25' },
    secure: { label: 'Use TLS from the start', type: 'boolean', placeholder: 'On for port 465' },
    username: { label: 'Username', type: 'text', placeholder: 'Optional' },
    password: { label: 'Password', type: 'password', placeholder: 'Optional' },
    tls: {
      label: 'TLS',
      type: 'select',
      placeholder: 'auto (STARTTLS; required with credentials); none only for lab servers',
    },
  }),
];
