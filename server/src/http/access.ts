import type { FastifyReply, FastifyRequest, RouteOptions } from 'fastify';
import { AppError } from './errors.ts';
import type { ApiKeyScope, Permission } from './permissions.ts';

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
      /** Routes about the user rather than a team (listing and creating teams): they answer a
       * user who belongs to no team too, who has no principal then (`sessionUserOf`). */
      teamOptional?: boolean;
    };

declare module 'fastify' {
  interface FastifyContextConfig {
    access?: AccessRule;
  }
}

/** An onRequest hook: resolves, or throws an AppError (401/403/429) refusing the request. */
export type Hook = (request: FastifyRequest, reply: FastifyReply) => Promise<void>;

/**
 * The guards access rules are enforced with, owned by the modules that know sessions and keys:
 * `session` (auth module: session cookie, role holding `permission`) and `apiKey` (api-keys
 * module: `X-API-Key` holding one of `scopes`). The composition root registers them with
 * {@link registerAccessGuards} before any route is declared, so http never imports a module
 * (issue #9, "Dependencies point one way").
 */
export interface AccessGuards {
  session(
    permission: Permission | undefined,
    options: { teamFallback: boolean; teamOptional: boolean },
  ): Hook;
  apiKey(scopes: readonly ApiKeyScope[]): Hook;
}

let registered: AccessGuards | undefined;

/** Registers the guards {@link access} installs; called once per process, before routes register. */
export function registerAccessGuards(guards: AccessGuards): void {
  registered = guards;
}

function guards(): AccessGuards {
  if (!registered) throw new Error('access(): no guards registered (call registerAccessGuards first)');
  return registered;
}

/**
 * The guard enforcing `rule`, run as an onRequest hook: it reads headers only, so an unauthenticated
 * caller is refused before its body is read or parsed (and before validation, so 401/403 come first).
 * @throws Error when a non-public rule is declared before {@link registerAccessGuards} ran.
 */
function guardFor(rule: AccessRule): Hook | undefined {
  if (rule.kind === 'public') return undefined;
  const { session, apiKey } = guards();
  if (rule.kind === 'apiKey') return apiKey(rule.scopes);
  const sessionGuard = session(rule.permission, {
    teamFallback: rule.teamFallback ?? false,
    teamOptional: rule.teamOptional ?? false,
  });
  const keyGuard = rule.apiKeyScopes?.length ? apiKey(rule.apiKeyScopes) : undefined;
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
