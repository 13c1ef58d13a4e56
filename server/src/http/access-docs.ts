import type { SwaggerTransform } from '@fastify/swagger';
import type { FastifySchema } from 'fastify';
import type { AccessRule } from './access.ts';

/** An OpenAPI security requirement list (`[{session: []}, {apiKey: []}]`: either one). */
type Security = Record<string, string[]>[];

/**
 * The OpenAPI `security` of a route from its access rule (http/access.ts), the one source of what a
 * route accepts: a session route that also takes API keys with a scope (`apiKeyScopes`, e.g. the
 * log reads with `logs:read`) lists both; a public route none. Hand-written `security` lists said
 * "session" for such routes (review finding, session 16).
 */
export function securityOf(rule: AccessRule): Security {
  if (rule.kind === 'public') return [];
  if (rule.kind === 'apiKey') return [{ apiKey: [] }];
  return rule.apiKeyScopes?.length ? [{ session: [] }, { apiKey: [] }] : [{ session: [] }];
}

/** One sentence naming who may call a route under `rule`: the role permission and the API key scope. */
export function accessSentence(rule: AccessRule): string {
  if (rule.kind === 'public') return 'Access: public.';
  if (rule.kind === 'apiKey') return `Access: an API key with the scope ${rule.scopes.join(' or ')}.`;
  const session = rule.permission
    ? `a session whose role holds ${rule.permission}`
    : 'a session of any team member';
  const key = rule.apiKeyScopes?.length
    ? `, or an API key with the scope ${rule.apiKeyScopes.join(' or ')}`
    : '';
  return `Access: ${session}${key}.`;
}

/** The JSON schema of the spec's error envelope ("Errors"): `{success: false, error: {code, message, details}}`. */
export const ERROR_ENVELOPE_SCHEMA = {
  type: 'object',
  properties: {
    success: { type: 'boolean', enum: [false] },
    error: {
      type: 'object',
      properties: {
        code: { type: 'string' },
        message: { type: 'string' },
        details: { type: 'object', additionalProperties: true },
      },
      required: ['code', 'message', 'details'],
    },
  },
  required: ['success', 'error'],
} as const;

/** {@link ERROR_ENVELOPE_SCHEMA} as every 4xx and 5xx answer of a documented route (a Fastify response schema). */
const ERROR_ENVELOPE = {
  description:
    "An error in the spec's envelope: `error.code` is one of the spec's codes, `details` an object",
  ...ERROR_ENVELOPE_SCHEMA,
} as const;

/** The OpenAPI extension marking a body the route also takes absent (see {@link markOptionalBodies}). */
const OPTIONAL_BODY = 'x-postwright-optional-body';

/**
 * Wraps a @fastify/swagger `transform` (here fastify-type-provider-zod's): each route's document
 * gets the `security` of its access rule, a line naming its permission and scope, the error
 * envelope as its 4XX and 5XX answers, and a mark when its body may be left out (its zod schema
 * takes `undefined`; @fastify/swagger marks every body required). Review finding, session 16.
 */
export function withAccessDocs<S extends FastifySchema>(transform: SwaggerTransform<S>): SwaggerTransform<S> {
  return (input) => {
    const out = transform(input);
    const rule = (input.route.config as { access?: AccessRule } | undefined)?.access;
    const schema = out.schema as
      | (S & { hide?: boolean; description?: string; response?: Record<string, unknown> })
      | undefined;
    if (!rule || !schema || schema.hide) return out;
    const description = typeof schema.description === 'string' ? `${schema.description}\n\n` : '';
    const body = (input.schema as { body?: { safeParse?: (value: unknown) => { success: boolean } } }).body;
    const optionalBody = typeof body?.safeParse === 'function' && body.safeParse(undefined).success;
    return {
      ...out,
      schema: {
        ...schema,
        security: securityOf(rule),
        description: `${description}${accessSentence(rule)}`,
        ...(schema.response
          ? { response: { ...schema.response, '4XX': ERROR_ENVELOPE, '5XX': ERROR_ENVELOPE } }
          : {}),
        ...(optionalBody ? { [OPTIONAL_BODY]: true } : {}),
      },
    };
  };
}

/**
 * A @fastify/swagger `transformObject`: the operations {@link withAccessDocs} marked take their
 * body as optional (`requestBody.required: false`); the mark itself is removed.
 */
export function markOptionalBodies<D>(document: D): D {
  const paths = (document as { paths?: Record<string, Record<string, Record<string, unknown>>> }).paths ?? {};
  for (const operations of Object.values(paths)) {
    for (const operation of Object.values(operations)) {
      if (!operation || typeof operation !== 'object' || !(OPTIONAL_BODY in operation)) continue;
      delete operation[OPTIONAL_BODY];
      const requestBody = operation.requestBody as { required?: boolean } | undefined;
      if (requestBody) requestBody.required = false;
    }
  }
  return document;
}
