import type { FastifyReply, FastifyRequest, RouteOptions } from 'fastify';
import { type ApiKeyScope, requireApiKey } from '../modules/api-keys/index.ts';
import { requireSession } from '../modules/auth/index.ts';
import type { Permission } from '../modules/auth/permissions.ts';
import { AppError } from './errors.ts';

/**
 * Who may call a route. Every route of the app declares one (the isolation matrix test walks the
 * route table and fails on a route without a rule):
 * - `public`: no authentication (health, docs, sign-in, served files);
 * - `apiKey`: the public API, an `X-API-Key` holding one of `scopes` (spec "Public API");
 * - `session`: dashboard endpoints, a session cookie whose role grants `permission` (membership
 *   only when absent); with `apiKeyScopes`, an API key holding one of them may call it too
 *   (issue #3: templates:read, templates:write, logs:read on the matching dashboard endpoints;
 *   issue #8: templates:delete, not templates:write, on template delete).
 */
export type AccessRule =
  | { kind: 'public' }
  | { kind: 'apiKey'; scopes: readonly ApiKeyScope[] }
  | {
      kind: 'session';
      permission?: Permission;
      apiKeyScopes?: readonly ApiKeyScope[];
      /** Routes that manage the team context itself (list, create, switch) still answer when the
       * session's active team was revoked, on the user's oldest remaining team. */
      teamFallback?: boolean;
    };

declare module 'fastify' {
  interface FastifyContextConfig {
    access?: AccessRule;
  }
}

type Hook = (request: FastifyRequest, reply: FastifyReply) => Promise<void>;

/**
 * The guard enforcing `rule`, run as an onRequest hook: it reads headers only, so an unauthenticated
 * caller is refused before its body is read or parsed (and before validation, so 401/403 come first).
 */
function guardFor(rule: AccessRule): Hook | undefined {
  if (rule.kind === 'public') return undefined;
  if (rule.kind === 'apiKey') return requireApiKey(...rule.scopes);
  const sessionGuard = requireSession(rule.permission, { teamFallback: rule.teamFallback ?? false });
  const keyGuard = rule.apiKeyScopes?.length ? requireApiKey(...rule.apiKeyScopes) : undefined;
  return async (request, reply) => {
    if (request.headers['x-api-key'] === undefined) return sessionGuard(request, reply);
    if (!keyGuard)
      throw new AppError('UNAUTHORIZED', 'This endpoint needs a dashboard session, not an API key');
    return keyGuard(request, reply);
  };
}

/**
 * Route options declaring and enforcing `rule`: spread into a route's options
 * (`app.get(url, { ...access({ kind: 'session', permission: 'logs:view' }), schema }, handler)`).
 */
export function access(rule: AccessRule): Pick<RouteOptions, 'config' | 'onRequest'> {
  const guard = guardFor(rule);
  return guard ? { config: { access: rule }, onRequest: guard } : { config: { access: rule } };
}

/** One row of the route table: method, URL pattern and its access rule (undefined = undeclared). */
export interface RouteAccess {
  method: string;
  url: string;
  access: AccessRule | undefined;
}
