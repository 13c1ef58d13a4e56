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

/**
 * Wraps a @fastify/swagger `transform` (here fastify-type-provider-zod's): each route's document
 * gets the `security` of its access rule and a line naming its permission and scope.
 */
export function withAccessDocs<S extends FastifySchema>(transform: SwaggerTransform<S>): SwaggerTransform<S> {
  return (input) => {
    const out = transform(input);
    const rule = (input.route.config as { access?: AccessRule } | undefined)?.access;
    const schema = out.schema as (S & { hide?: boolean; description?: string }) | undefined;
    if (!rule || !schema || schema.hide) return out;
    const description = typeof schema.description === 'string' ? `${schema.description}\n\n` : '';
    return {
      ...out,
      schema: { ...schema, security: securityOf(rule), description: `${description}${accessSentence(rule)}` },
    };
  };
}
