import type { Permission, TeamRole } from './permissions.ts';

/** Who is calling, as established by a guard (session cookie or API key). */
export type Principal = SessionPrincipal | ApiKeyPrincipal;

/** A dashboard user signed in with a session cookie, acting in the session's active team. */
export interface SessionPrincipal {
  kind: 'session';
  userId: string;
  sessionId: string;
  teamId: string;
  role: TeamRole;
  permissions: ReadonlySet<Permission>;
}

/** A programmatic caller authenticated with `X-API-Key`. */
export interface ApiKeyPrincipal {
  kind: 'apiKey';
  apiKeyId: string;
  teamId: string;
  scopes: readonly string[];
}

/** The signed-in user of a session request, set by the session guard whether or not a team is resolved. */
export interface SessionUser {
  userId: string;
  sessionId: string;
}

declare module 'fastify' {
  interface FastifyRequest {
    principal: Principal | null;
    sessionUser: SessionUser | null;
  }
}

/** The principal a guard put on the request; a route without a guard calling this is a bug. */
export function principalOf(request: { principal: Principal | null }): Principal {
  if (!request.principal) throw new Error('route used principalOf() without an authentication guard');
  return request.principal;
}

/** The principal, narrowed to a session (routes guarded by requireSession). */
export function sessionOf(request: { principal: Principal | null }): SessionPrincipal {
  const principal = principalOf(request);
  if (principal.kind !== 'session') throw new Error('route expected a session principal');
  return principal;
}

/** The team a guarded request acts on (session's active team or the API key's team). */
export function teamIdOf(request: { principal: Principal | null }): string {
  return principalOf(request).teamId;
}

/** The user behind the request, or null for an API key (recorded as `createdBy`). */
export function actingUserIdOf(request: { principal: Principal | null }): string | null {
  const principal = principalOf(request);
  return principal.kind === 'session' ? principal.userId : null;
}

/** The principal, narrowed to an API key (routes guarded by an apiKey access rule). */
export function apiKeyOf(request: { principal: Principal | null }): ApiKeyPrincipal {
  const principal = principalOf(request);
  if (principal.kind !== 'apiKey') throw new Error('route expected an API key principal');
  return principal;
}

/**
 * The signed-in user of a route declared `teamOptional` (listing and creating teams), which also
 * answers a user who belongs to no team (no principal then).
 */
export function sessionUserOf(request: { sessionUser: SessionUser | null }): SessionUser {
  if (!request.sessionUser) throw new Error('route used sessionUserOf() without a session guard');
  return request.sessionUser;
}
