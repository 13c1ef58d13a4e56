/**
 * The access vocabulary the route guards check (http/access.ts): team roles, their permissions
 * and API key scopes. It lives under http, not in the auth or api-keys module, so that access
 * rules and principals can name it without http importing a module (issue #9, "Dependencies
 * point one way").
 *
 * Team roles and the permission matrix (spec "Authentication" 5; the matrix is issue #2's):
 * owner and admin hold every permission; member holds api-keys:view, templates:create,
 * templates:update, logs:view, logs:resend; viewer holds logs:view. `team:manage` (members and
 * invitations) is issue #3's, held by owner and admin only.
 */
export const PERMISSIONS = [
  'api-keys:view',
  'api-keys:create',
  'api-keys:delete',
  'adapters:view-config',
  'adapters:create',
  'adapters:update',
  'adapters:delete',
  'templates:create',
  'templates:update',
  'templates:delete',
  'logs:view',
  'logs:resend',
  'webhooks:create',
  'webhooks:update',
  'webhooks:delete',
  'team:manage',
] as const;

export type Permission = (typeof PERMISSIONS)[number];

export const TEAM_ROLES = ['owner', 'admin', 'member', 'viewer'] as const;
export type TeamRole = (typeof TEAM_ROLES)[number];

export const ROLE_PERMISSIONS: Record<TeamRole, readonly Permission[]> = {
  owner: PERMISSIONS,
  admin: PERMISSIONS,
  member: ['api-keys:view', 'templates:create', 'templates:update', 'logs:view', 'logs:resend'],
  viewer: ['logs:view'],
};

/** The permissions of `role`; an unknown role string holds none. */
export function permissionsOf(role: string): ReadonlySet<Permission> {
  return new Set((ROLE_PERMISSIONS as Record<string, readonly Permission[]>)[role] ?? []);
}

/** True when `value` is one of the four team roles. */
export function isTeamRole(value: string): value is TeamRole {
  return (TEAM_ROLES as readonly string[]).includes(value);
}

/**
 * API key scopes (spec "API key"), plus `templates:delete` (issue #8): `templates:write` creates and
 * modifies templates but does not delete them, as a session needs `templates:delete` to delete.
 */
export const API_KEY_SCOPES = [
  'send',
  'templates:read',
  'templates:write',
  'templates:delete',
  'logs:read',
] as const;
export type ApiKeyScope = (typeof API_KEY_SCOPES)[number];
