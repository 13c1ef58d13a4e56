/**
 * The teams module's public face (issue #3): teams, members, invitations, their routes and the
 * `invitation.send` job handler.
 */
export { createSendInvitationHandler, teamJobHandlers } from './send-invitation.job.ts';
export { joinInvitedTeams } from './teams.accept-invitation.service.ts';
export {
  type DeletedTeam,
  type DeletedUser,
  deleteUserByEmail,
  removeDeletedTeamFiles,
} from './teams.delete-user.service.ts';
export { teamRoutes } from './teams.routes.ts';
