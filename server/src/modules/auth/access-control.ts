import { createAccessControl } from 'better-auth/plugins/access';
import { adminAc, defaultStatements, memberAc, ownerAc } from 'better-auth/plugins/organization/access';
import {
  PERMISSIONS,
  type Permission,
  ROLE_PERMISSIONS,
  TEAM_ROLES,
  type TeamRole,
} from '../../http/permissions.ts';

/** Resource → actions, the shape better-auth's access control works with. */
type StatementMap = Record<string, string[]>;

/** The organization plugin's own resources that team roles keep (ARCHITECTURE.md "Auth notes"). */
const PLUGIN_RESOURCES = ['organization', 'member', 'invitation'] as const;

/** `['adapters:create', 'logs:view']` → `{adapters: ['create'], logs: ['view']}`. */
function toStatements(permissions: readonly Permission[]): StatementMap {
  const statements: StatementMap = {};
  for (const permission of permissions) {
    const [resource, action] = permission.split(':') as [string, string];
    statements[resource] = [...(statements[resource] ?? []), action];
  }
  return statements;
}

function pluginStatements(source: Record<string, readonly string[]>): StatementMap {
  return Object.fromEntries(PLUGIN_RESOURCES.map((resource) => [resource, [...(source[resource] ?? [])]]));
}

/**
 * Access control of the organization plugin ("teams"): its own statements for organization,
 * member and invitation merged with ours, which are derived from {@link PERMISSIONS}
 * (`'api-keys': [view, create, delete]`, `adapters: [view-config, create, update, delete]`, …).
 */
export const accessControl = createAccessControl({
  ...pluginStatements(defaultStatements),
  ...toStatements(PERMISSIONS),
});

/**
 * What each team role may do in the plugin's own resources. Custom roles REPLACE the plugin's
 * defaults, so owners and admins keep their invitation/member rights only because they are
 * merged here; members and viewers get the plugin's `member` role (none).
 */
const PLUGIN_ROLE_STATEMENTS: Record<TeamRole, StatementMap> = {
  owner: pluginStatements(ownerAc.statements),
  admin: pluginStatements(adminAc.statements),
  member: pluginStatements(memberAc.statements),
  viewer: pluginStatements(memberAc.statements),
};

/** The four team roles as better-auth roles: plugin rights plus {@link ROLE_PERMISSIONS}. */
export const teamRoles = Object.fromEntries(
  TEAM_ROLES.map((role) => [
    role,
    accessControl.newRole({ ...PLUGIN_ROLE_STATEMENTS[role], ...toStatements(ROLE_PERMISSIONS[role]) }),
  ]),
) as Record<TeamRole, ReturnType<typeof accessControl.newRole>>;
