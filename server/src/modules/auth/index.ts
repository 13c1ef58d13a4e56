/**
 * The auth module's public face: better-auth, its routes, the session guard and first-run setup;
 * for the teams module also memberships, password accounts, the session description and errors.
 */

export {
  isTeamRole,
  type Permission,
  permissionsOf,
  TEAM_ROLES,
  type TeamRole,
} from '../../http/permissions.ts';
export {
  clearActiveTeam,
  deleteMember,
  findMembership,
  insertMember,
  insertUserWithPassword,
  setMemberRole,
} from './auth.repository.ts';
export { authRoutes } from './auth.routes.ts';
export { meResponse } from './auth.schema.ts';
export { describeSession, type SessionDescription } from './auth.service.ts';
export { AUTH_LIBRARY_PATHS } from './auth-docs.ts';
export { authErrorToAppError } from './auth-error-envelope.ts';
export { CLIENT_IP_HEADER, isAPIError } from './auth-light.ts';
export type { Auth, AuthDeps } from './better-auth.ts';
export { createAuth } from './lazy-auth.ts';
export { assertSameOrigin, authHeaders, signedInUser } from './request-auth.ts';
export { requireSession } from './require-session.ts';
export {
  isSetupRequired,
  printSetupUrlIfNeeded,
  resolveSetupToken,
  setupUrl,
  withSetupToken,
} from './setup-token.ts';
export type { JoinInvitedTeams } from './sign-up-policy.ts';
