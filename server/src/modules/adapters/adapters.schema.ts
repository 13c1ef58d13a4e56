import { z } from 'zod';
import { PROVIDERS } from '../../providers/index.ts';
import { mailboxSchema } from '../../providers/mailbox-address.ts';
import { ADAPTER_TYPES } from './adapter-types.ts';

const name = z.string().trim().min(1).max(100);

/**
 * An adapter's `config` in a request body. The body's schema takes any object: the config is
 * validated against its adapter's type by parseAdapterConfig (400 VALIDATION_ERROR with issues
 * `config.<field>`). The OpenAPI document lists each type's config (the spec's "Adapter types and
 * their config fields", from the providers' own schemas: required fields, enums such as the
 * regions, defaults) as `anyOf`, titled by type; not `oneOf`, since two types share a shape
 * (mailapi_a and mailapi_b both take `{apiKey}`), which oneOf would refuse (OpenAPI review).
 */
const configBody = z.record(z.string(), z.unknown()).meta({
  description: "The config of the adapter's type: one of these, by `type` (see GET /api/adapters/types)",
  anyOf: ADAPTER_TYPES.map((type) => {
    const { $schema: _, ...schema } = z.toJSONSchema(PROVIDERS[type].configSchema, {
      target: 'openapi-3.0',
      io: 'input',
    });
    return { title: type, description: `${PROVIDERS[type].name} (${type})`, ...schema };
  }),
});

export const createAdapterBody = z.object({
  name,
  type: z.enum(ADAPTER_TYPES),
  config: configBody,
  defaultFrom: mailboxSchema.optional(),
  isDefault: z.boolean().optional(),
  /** Issue #10: an adapter of the same team to try when this one fails after its retries. */
  fallbackAdapterId: z.string().min(1).nullable().optional(),
});

export const updateAdapterBody = z.object({
  name: name.optional(),
  config: configBody.optional(),
  defaultFrom: mailboxSchema.nullable().optional(),
  isDefault: z.boolean().optional(),
  isActive: z.boolean().optional(),
  fallbackAdapterId: z.string().min(1).nullable().optional(),
});

export const adapterIdParams = z.object({ id: z.string().min(1) });

export const adapterView = z.object({
  id: z.string(),
  name: z.string(),
  type: z.string(),
  defaultFrom: z.string().nullable(),
  isDefault: z.boolean(),
  isActive: z.boolean(),
  fallbackAdapterId: z.string().nullable(),
  createdAt: z.string(),
  updatedAt: z.string(),
});
export type AdapterView = z.infer<typeof adapterView>;

// eventsUrl (issue #11): where the provider posts its delivery events; null for SMTP (no events).
export const adapterWithConfigView = adapterView.extend({
  config: z.record(z.string(), z.unknown()),
  eventsUrl: z.string().nullable(),
});
// The create and update responses keep the spec's exact fields; fallbackAdapterId (issue #10) is
// read back through the list and get-one.
export const createdAdapterView = adapterView.omit({ updatedAt: true, fallbackAdapterId: true });
export const updatedAdapterView = adapterView.pick({
  id: true,
  name: true,
  defaultFrom: true,
  isActive: true,
  updatedAt: true,
});
export const adapterTestResult = z.object({ success: z.boolean(), message: z.string() });
export const adapterTypeDescriptor = z.object({
  type: z.string(),
  name: z.string(),
  description: z.string(),
  configFields: z.array(
    z.object({
      name: z.string(),
      label: z.string(),
      type: z.string(),
      required: z.boolean(),
      placeholder: z.string(),
      options: z.array(z.string()).optional(),
    }),
  ),
});
