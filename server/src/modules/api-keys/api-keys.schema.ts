import { z } from 'zod';

import { API_KEY_SCOPES } from '../../http/permissions.ts';

export { API_KEY_SCOPES, type ApiKeyScope } from '../../http/permissions.ts';

/** Requests per minute when a key is created without rateLimit (issue #2). */
export const DEFAULT_RATE_LIMIT = 100;

const name = z.string().trim().min(1).max(100);
const scopeList = z.array(z.enum(API_KEY_SCOPES)).min(1);
const withoutRepeats = <T>(list: T[]): T[] => [...new Set(list)];
const scopes = scopeList.transform(withoutRepeats);
/** Requests per minute: 1 to 1,000,000 (issue #9 raises the spec's 10,000). */
export const MAX_RATE_LIMIT = 1_000_000;
const rateLimit = z.number().int().min(1).max(MAX_RATE_LIMIT);

/** Scopes of a key created without `scopes` (spec: "Default `["send"]` when omitted"). */
const DEFAULT_SCOPES = ['send'] as const;

export const createApiKeyBody = z.object({
  name,
  // The service applies the defaults; `default` documents them (OpenAPI review). On the list
  // itself: zod documents a transformed schema by its input, without metadata added after.
  scopes: scopeList
    .meta({ default: [...DEFAULT_SCOPES] })
    .transform(withoutRepeats)
    .optional(),
  rateLimit: rateLimit
    .optional()
    .meta({ default: DEFAULT_RATE_LIMIT, description: 'Requests per minute (1 to 1,000,000)' }),
  expiresAt: z.iso
    .datetime({ offset: true })
    .optional()
    .nullable()
    .refine((v) => !v || Date.parse(v) > Date.now(), 'must be in the future'),
});

export const updateApiKeyBody = z.object({
  name: name.optional(),
  scopes: scopes.optional(),
  rateLimit: rateLimit.optional(),
  isActive: z.boolean().optional(),
});

export const apiKeyIdParams = z.object({ id: z.string().min(1) });

/** Filters of `GET /api/api-keys` (issue #8): by creator, and by whether the creator is still a member. */
export const listApiKeysQuery = z.object({
  createdBy: z.string().min(1).optional(),
  creatorStatus: z.enum(['member', 'removed']).optional(),
});

/**
 * Who created a key (issue #8): a key keeps working after its creator leaves the team, so the view
 * says whether they are still a `member` or `removed`. Null when the user account no longer exists.
 */
export const apiKeyCreatorView = z
  .object({
    id: z.string(),
    name: z.string(),
    email: z.string(),
    status: z.enum(['member', 'removed']),
  })
  .nullable();

export const apiKeyView = z.object({
  id: z.string(),
  name: z.string(),
  keyPrefix: z.string(),
  scopes: z.array(z.string()),
  rateLimit: z.number(),
  expiresAt: z.string().nullable(),
  lastUsedAt: z.string().nullable(),
  isActive: z.boolean(),
  createdBy: z.string().nullable(),
  creator: apiKeyCreatorView,
  createdAt: z.string(),
  updatedAt: z.string(),
});
export type ApiKeyView = z.infer<typeof apiKeyView>;

export const createdApiKeyView = apiKeyView
  .pick({
    id: true,
    name: true,
    keyPrefix: true,
    scopes: true,
    rateLimit: true,
    expiresAt: true,
    isActive: true,
    createdBy: true,
    createdAt: true,
  })
  .extend({ key: z.string() });

export const updatedApiKeyView = apiKeyView.pick({
  id: true,
  name: true,
  keyPrefix: true,
  scopes: true,
  rateLimit: true,
  isActive: true,
  updatedAt: true,
});

export const regeneratedApiKeyView = apiKeyView
  .pick({ id: true, name: true, keyPrefix: true, scopes: true, rateLimit: true, isActive: true })
  .extend({ key: z.string() });
