import type { z } from 'zod';
import type { OutboundPolicy } from '../outbound/index.ts';
import type { EmailProvider, ProviderError } from './types.ts';

/**
 * The provider contract (issue #10 "A provider contract first"): every provider file exports one
 * {@link ProviderDefinition}, and providers/registry.ts collects them. Everything the rest of the
 * application knows about an adapter type comes from its definition: the config schema (validated
 * once, in the registry), the form the dashboard shows (`GET /api/adapters/types`), how to build the
 * provider, and how its SDK's errors are classified.
 */

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

/** A field as a definition writes it: name, required and options come from the schema. */
export type FieldSpec = Omit<AdapterConfigField, 'name' | 'required' | 'options'>;

/** The minimal logger a provider may write to (pino's shape). */
export interface ProviderLogger {
  warn(object: object, message?: string): void;
}

/** The operator-only base-URL override variables, one per hosted-API provider (issue #10). */
export const PROVIDER_ENDPOINT_VARIABLES = [
  'PROVIDER_ENDPOINT_RESEND',
  'PROVIDER_ENDPOINT_SENDGRID',
  'PROVIDER_ENDPOINT_MAILGUN',
  'PROVIDER_ENDPOINT_SES',
  'PROVIDER_ENDPOINT_POSTMARK',
] as const;

export type ProviderEndpointVariable = (typeof PROVIDER_ENDPOINT_VARIABLES)[number];

/** What {@link ProviderDefinition.create} gets besides the adapter's config. */
export interface ProviderContext {
  /**
   * HTTP settings: `endpoint` is the operator's base-URL override (`PROVIDER_ENDPOINT_*`), trusted
   * configuration that bypasses the outbound policy; unset, the provider's public API is used.
   */
  http?: { endpoint?: string | undefined };
  logger: ProviderLogger;
  /** Connections (= sends in flight) the provider opens at most (ADAPTER_MAX_CONNECTIONS). */
  maxConnections: number;
  /** Which addresses its connections may reach (SMTP_ALLOW_PRIVATE). */
  outbound: OutboundPolicy;
  /**
   * How long (ms) one hosted-API request may take before the SDK or transport ends it by itself:
   * `(SEND_TIMEOUT_SECONDS + 1) × 1000`, after the worker's send deadline, so the deadline decides a
   * send's outcome (ambiguous once under way) and this only ends a request given up on (its
   * connection and send slot are freed: mailgun.js and @sendgrid/client set no timeout of their
   * own) or one made without a deadline (the adapter test, invitations). Postmark's own 60 s
   * default fired before a longer SEND_TIMEOUT_SECONDS and was read as a transient error, so the
   * email was sent again (session 16).
   */
  requestTimeoutMs: number;
}

/**
 * An email's size as the hosted APIs count it: its attachments base64-encoded (4 bytes per 3, plus
 * a line break every 76 characters in MIME) and its HTML as UTF-8 (the text part is smaller). An estimate a little
 * over the real figure (headers and JSON framing aside).
 * @param attachmentBytes decoded bytes of every attachment and PDF together.
 */
export function estimatedMessageBytes(attachmentBytes: number, html: string): number {
  const encoded = Math.ceil(attachmentBytes / 3) * 4;
  return encoded + Math.ceil(encoded / 76) * 2 + Buffer.byteLength(html);
}

/** One adapter type's provider. `S` is its config schema. */
export interface ProviderDefinition<T extends string = string, S extends z.ZodType = z.ZodType> {
  /** The adapter type id (spec "Adapter"), e.g. `mailapi_a`. */
  type: T;
  /** Display name and description of the types endpoint. */
  name: string;
  description: string;
  /** The config schema: fields exactly as the spec lists them; unknown keys refused. */
  configSchema: S;
  /** The form fields, one per schema key, in display order. */
  fields: Record<string, FieldSpec>;
  /** The variable that overrides its base URL; none for SMTP (its host is in the config). */
  endpointVariable?: ProviderEndpointVariable;
  /**
   * The largest message its API takes, in bytes as it counts them (attachments base64-encoded):
   * checked at accept against {@link estimatedMessageBytes}. None for SMTP (the server decides).
   */
  maxMessageBytes?: number;
  /**
   * Builds the provider (its SDK client, with keep-alive pools) for a validated config; called once
   * per adapter version (the provider cache).
   */
  create(config: z.output<S>, context: ProviderContext): EmailProvider;
  /**
   * Turns whatever its SDK threw into a ProviderError: transient (network, 429, 5xx) or permanent
   * (other 4xx), with the provider's own message (rule: http-transport.ts classifyHttpFailure).
   */
  classifyError(error: unknown): ProviderError;
}
