/**
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
