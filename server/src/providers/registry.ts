import { z } from 'zod';
import { DEFAULT_OUTBOUND_POLICY } from '../outbound/index.ts';
import type {
  AdapterConfigField,
  FieldSpec,
  ProviderContext,
  ProviderDefinition,
  ProviderEndpointVariable,
} from './definition.ts';
import { mailgunProvider } from './mailgun.ts';
import { postmarkProvider } from './postmark.ts';
import { resendProvider } from './resend.ts';
import { sendgridProvider } from './sendgrid.ts';
import { sesProvider } from './ses.ts';
import { smtpProvider } from './smtp.ts';
import { type EmailProvider, ProviderError } from './types.ts';

/**
 * Every adapter type's provider definition (definition.ts), in the order the spec lists the types
 * ("Adapter"). The one place that maps a type id to its provider: config validation, the types
 * endpoint's form descriptors and provider construction all read it.
 */
export const PROVIDERS = {
  mailapi_a: resendProvider,
  mailapi_b: sendgridProvider,
  mailapi_domain: mailgunProvider,
  mailapi_cloud: sesProvider,
  mailapi_server: postmarkProvider,
  smtp: smtpProvider,
} as const;

export type AdapterType = keyof typeof PROVIDERS;

/** The six adapter type ids (spec, "Adapter"). */
export const ADAPTER_TYPES = Object.keys(PROVIDERS) as [AdapterType, ...AdapterType[]];

/** The parsed config of adapter type `T` (defaults applied, e.g. Mailgun's `region: "us"`). */
export type AdapterConfig<T extends AdapterType = AdapterType> = z.output<
  (typeof PROVIDERS)[T]['configSchema']
>;

/** True when `value` is one of {@link ADAPTER_TYPES}. */
export function isAdapterType(value: unknown): value is AdapterType {
  return typeof value === 'string' && Object.hasOwn(PROVIDERS, value);
}

/** One problem with a config: `path` like `config.port` (or `type`), and what is wrong. */
export interface ConfigIssue {
  path: string;
  message: string;
}

/**
 * An adapter config that does not fit its type's schema (or an unknown type). A permanent
 * ProviderError (code ECONFIG) for the worker; the adapters module answers it as 400
 * VALIDATION_ERROR with `details.issues`.
 */
export class ProviderConfigError extends ProviderError {
  readonly issues: ConfigIssue[];

  constructor(type: string, issues: ConfigIssue[]) {
    super(`Invalid ${type} adapter config: ${issues.map((issue) => issue.path).join(', ')}`, {
      permanent: true,
      providerCode: 'ECONFIG',
    });
    this.name = 'ProviderConfigError';
    this.issues = issues;
  }
}

/**
 * Validates a config against its type's schema: the one validation for the API (create, update)
 * and for stored rows (which may outlive the code that wrote them).
 * @returns the config with defaults applied.
 * @throws ProviderConfigError with issues `{path, message}`: paths start with `config.` (one issue
 *   per unknown key, message "Unknown field"; a missing field says "Required"), or are `type` for an
 *   unknown type.
 */
export function parseProviderConfig<T extends AdapterType>(type: T, config: unknown): AdapterConfig<T> {
  if (!isAdapterType(type)) {
    throw new ProviderConfigError(String(type), [
      { path: 'type', message: `Unknown adapter type; expected one of ${ADAPTER_TYPES.join(', ')}` },
    ]);
  }
  const schema: z.ZodType = PROVIDERS[type].configSchema;
  const result = schema.safeParse(config, {
    error: (issue) => (issue.code === 'invalid_type' && issue.input === undefined ? 'Required' : undefined),
  });
  if (!result.success) throw new ProviderConfigError(type, toIssues(result.error));
  return result.data as AdapterConfig<T>;
}

/** Flattens zod issues to `{path, message}`, one issue per unknown key. */
function toIssues(error: z.ZodError): ConfigIssue[] {
  return error.issues.flatMap((issue) => {
    const base = ['config', ...issue.path.map(String)];
    if (issue.code === 'unrecognized_keys') {
      return issue.keys.map((key) => ({ path: [...base, key].join('.'), message: 'Unknown field' }));
    }
    return [{ path: base.join('.'), message: issue.message }];
  });
}

/** Options of {@link createProvider}; each defaults as stated. */
export interface CreateProviderOptions {
  /** Base-URL overrides by variable (the operator's PROVIDER_ENDPOINT_*); none by default. */
  endpoints?: Partial<Record<ProviderEndpointVariable, string | undefined>>;
  logger?: ProviderContext['logger'];
  /** Default 10. */
  maxConnections?: number;
  /** See {@link ProviderContext.requestTimeoutMs}; default {@link DEFAULT_REQUEST_TIMEOUT_MS}. */
  requestTimeoutMs?: number;
  /** Default: public addresses only. */
  outbound?: ProviderContext['outbound'];
}

/** The request timeout of a provider made without one: the default SEND_TIMEOUT_SECONDS (60) + 1 s. */
export const DEFAULT_REQUEST_TIMEOUT_MS = 61_000;

const silentLogger: ProviderContext['logger'] = { warn: () => {} };

/**
 * Builds the provider of one adapter: validates `config` ({@link parseProviderConfig}) and calls its
 * definition's `create` with the endpoint override of its type.
 * @throws ProviderConfigError (a permanent ProviderError) for an invalid config or unknown type.
 */
export function createProvider(
  type: AdapterType,
  config: unknown,
  options: CreateProviderOptions = {},
): EmailProvider {
  const parsed = parseProviderConfig(type, config);
  const definition = PROVIDERS[type] as ProviderDefinition;
  const endpoint = definition.endpointVariable ? options.endpoints?.[definition.endpointVariable] : undefined;
  return definition.create(parsed, {
    ...(endpoint ? { http: { endpoint } } : {}),
    logger: options.logger ?? silentLogger,
    maxConnections: options.maxConnections ?? 10,
    requestTimeoutMs: options.requestTimeoutMs ?? DEFAULT_REQUEST_TIMEOUT_MS,
    outbound: options.outbound ?? DEFAULT_OUTBOUND_POLICY,
  });
}

/** The largest message the provider of `type` takes (ProviderDefinition.maxMessageBytes); undefined: no bound of its own. */
export function maxMessageBytesOf(type: string): number | undefined {
  return (PROVIDERS as Record<string, ProviderDefinition | undefined>)[type]?.maxMessageBytes;
}

/** What `GET /api/adapters/types` returns per type (spec: "Adapter type descriptor"). */
export interface AdapterTypeDescriptor {
  type: AdapterType;
  name: string;
  description: string;
  configFields: AdapterConfigField[];
}

/**
 * The form descriptor of one definition: `required` and a select's `options` come from its schema,
 * so the form can never disagree with what {@link parseProviderConfig} accepts.
 * @throws Error when a form field is not in the schema or a schema key has no form field (a
 *   programming error, caught at start-up).
 */
function describe(definition: ProviderDefinition): AdapterTypeDescriptor {
  const shape = objectShape(definition.configSchema);
  const missing = Object.keys(shape).filter((key) => !(key in definition.fields));
  if (missing.length) throw new Error(`${definition.type}: no form field for ${missing.join(', ')}`);
  const configFields = Object.entries(definition.fields).map(([key, field]: [string, FieldSpec]) => {
    const schema = shape[key];
    if (!schema) throw new Error(`Descriptor field ${definition.type}.${key} is not in the schema`);
    const described: AdapterConfigField = {
      name: key,
      ...field,
      required: !schema.safeParse(undefined).success,
    };
    const values = enumValues(schema);
    if (values) described.options = [...values];
    return described;
  });
  return {
    type: definition.type as AdapterType,
    name: definition.name,
    description: definition.description,
    configFields,
  };
}

/** The fields of an object schema, seen through a refinement. */
function objectShape(schema: z.ZodType): Record<string, z.ZodType> {
  if (schema instanceof z.ZodObject) return schema.shape as Record<string, z.ZodType>;
  throw new Error('An adapter config schema must be an object schema');
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
export const ADAPTER_TYPE_DESCRIPTORS: AdapterTypeDescriptor[] = ADAPTER_TYPES.map((type) =>
  describe(PROVIDERS[type] as ProviderDefinition),
);
