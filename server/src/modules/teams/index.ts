/** The teams module's public face (issue #3): teams, members, invitations and their routes. */
export { teamRoutes } from './teams.routes.ts';
