import type { FastifyInstance, FastifyRequest } from 'fastify';
import type { ZodTypeProvider } from 'fastify-type-provider-zod';
import { access } from '../../http/access.ts';
import { deleted, deletedEnvelope, ok } from '../../http/envelope.ts';
import { sessionOf, sessionUserOf } from '../../http/principal.ts';
import { assertSameOrigin, authHeaders, meResponse, signedInUser } from '../auth/index.ts';
import { acceptInvitation } from './teams.accept-invitation.service.ts';
import * as invitations from './teams.invitations.service.ts';
import * as members from './teams.members.service.ts';
import {
  acceptedInvitationResponse,
  acceptInvitationBody,
  createdInvitationResponse,
  createInvitationBody,
  createTeamBody,
  invitationListResponse,
  invitationParams,
  invitationSummaryResponse,
  invitationTokenParams,
  memberListResponse,
  memberParams,
  memberResponse,
  switchTeamBody,
  teamListResponse,
  teamResponse,
  updateMemberBody,
} from './teams.schema.ts';
import * as teams from './teams.service.ts';

/**
 * Teams, members and invitations (issue #3, "Teams"); all session routes run requireSession as an
 * onRequest hook (401 before the body is read):
 * - `GET /api/teams` → the caller's teams `[{id, name, slug, role, createdAt}]`;
 * - `POST /api/teams {name}` → 201, a team owned by the caller (the active team stays);
 * - `POST /api/auth/switch-team {teamId}` → the session's active team; answers as `GET /api/auth/me`;
 *   404 when not a member;
 * - `GET /api/team/members` (membership) → `[{userId, name, email, role, joinedAt}]`;
 * - `PUT /api/team/members/:userId {role}` (team:manage), `DELETE /api/team/members/:userId`
 *   (team:manage, or membership to remove oneself); owner rules in member-rules.ts;
 * - `POST /api/team/invitations {email, role}` (team:manage) → 201 new, 200 when a pending
 *   invitation for the email was renewed; `{id, email, role, expiresAt, createdAt, inviter, delivery}`,
 *   the email with the link going out through the queue (`delivery.status` queued or skipped; no
 *   SMTP wait), and `url` (the link) only when skipped;
 * - `GET /api/team/invitations` (team:manage) → pending ones, without links;
 *   `DELETE /api/team/invitations/:id` (team:manage; an owner's invitation: owners only);
 * - `GET /api/auth/invitations/:token` (public; the token of the link, never the id) → what the
 *   invitation is for;
 * - `POST /api/auth/invitations/:token/accept` (signed in, or `{name, password}`) → 201
 *   `{user, team, role}` with the session cookie.
 */
export async function teamRoutes(fastify: FastifyInstance): Promise<void> {
  const app = fastify.withTypeProvider<ZodTypeProvider>();
  const db = () => app.ctx.database.db;
  const invitationDeps = (request: FastifyRequest) => ({
    db: db(),
    queue: app.ctx.queue,
    baseUrl: app.ctx.config.BASE_URL,
    log: request.log,
  });

  // ---- teams -----------------------------------------------------------------------------------

  app.get(
    '/api/teams',
    {
      ...access({ kind: 'session', teamFallback: true, teamOptional: true }),
      schema: { tags: ['Teams'], response: { 200: teamListResponse } },
    },
    async (request) => ok(await teams.listTeams(db(), sessionUserOf(request).userId)),
  );

  app.post(
    '/api/teams',
    {
      ...access({ kind: 'session', teamFallback: true, teamOptional: true }),
      schema: { tags: ['Teams'], body: createTeamBody, response: { 201: teamResponse } },
    },
    async (request, reply) => {
      const team = await teams.createTeam(
        { db: db(), auth: app.ctx.auth },
        authHeaders(request),
        request.body.name,
      );
      return reply.code(201).send(ok(team));
    },
  );

  app.post(
    '/api/auth/switch-team',
    {
      ...access({ kind: 'session', teamFallback: true }),
      schema: { tags: ['Teams'], body: switchTeamBody, response: { 200: meResponse } },
    },
    async (request, reply) => {
      const { session, setCookie } = await teams.switchTeam(
        { db: db(), auth: app.ctx.auth },
        sessionOf(request),
        authHeaders(request),
        request.body.teamId,
      );
      if (setCookie.length > 0) reply.header('set-cookie', setCookie);
      return ok(session);
    },
  );

  // ---- members ---------------------------------------------------------------------------------

  app.get(
    '/api/team/members',
    {
      ...access({ kind: 'session' }),
      schema: { tags: ['Team members'], response: { 200: memberListResponse } },
    },
    async (request) => ok(await members.listMembers(db(), sessionOf(request).teamId)),
  );

  app.put(
    '/api/team/members/:userId',
    {
      ...access({ kind: 'session', permission: 'team:manage' }),
      schema: {
        tags: ['Team members'],
        params: memberParams,
        body: updateMemberBody,
        response: { 200: memberResponse },
      },
    },
    async (request) =>
      ok(await members.updateMemberRole(db(), sessionOf(request), request.params.userId, request.body.role)),
  );

  app.delete(
    '/api/team/members/:userId',
    {
      // team:manage is checked by the service: removing oneself (leaving) needs membership only.
      ...access({ kind: 'session' }),
      schema: { tags: ['Team members'], params: memberParams, response: { 200: deletedEnvelope } },
    },
    async (request) => {
      await members.removeMember(db(), sessionOf(request), request.params.userId);
      return deleted;
    },
  );

  // ---- invitations -----------------------------------------------------------------------------

  app.post(
    '/api/team/invitations',
    {
      ...access({ kind: 'session', permission: 'team:manage' }),
      schema: {
        tags: ['Team invitations'],
        body: createInvitationBody,
        response: { 200: createdInvitationResponse, 201: createdInvitationResponse },
      },
    },
    async (request, reply) => {
      const { invitation, created } = await invitations.createInvitation(
        invitationDeps(request),
        sessionOf(request),
        request.body,
        new Date(),
      );
      return reply.code(created ? 201 : 200).send(ok(invitation));
    },
  );

  app.get(
    '/api/team/invitations',
    {
      ...access({ kind: 'session', permission: 'team:manage' }),
      schema: { tags: ['Team invitations'], response: { 200: invitationListResponse } },
    },
    async (request) => ok(await invitations.listInvitations(db(), sessionOf(request).teamId, new Date())),
  );

  app.delete(
    '/api/team/invitations/:id',
    {
      ...access({ kind: 'session', permission: 'team:manage' }),
      schema: {
        tags: ['Team invitations'],
        params: invitationParams,
        response: { 200: deletedEnvelope },
      },
    },
    async (request) => {
      await invitations.cancelInvitation(db(), sessionOf(request), request.params.id);
      return deleted;
    },
  );

  app.get(
    '/api/auth/invitations/:token',
    {
      ...access({ kind: 'public' }),
      schema: {
        tags: ['Team invitations'],
        params: invitationTokenParams,
        response: { 200: invitationSummaryResponse },
      },
    },
    async (request) => ok(await invitations.describeInvitation(db(), request.params.token, new Date())),
  );

  app.post(
    '/api/auth/invitations/:token/accept',
    {
      ...access({ kind: 'public' }),
      onRequest: async (request) => assertSameOrigin(request),
      schema: {
        tags: ['Team invitations'],
        params: invitationTokenParams,
        body: acceptInvitationBody,
        response: { 201: acceptedInvitationResponse },
      },
    },
    async (request, reply) => {
      const result = await acceptInvitation(
        { db: db(), auth: app.ctx.auth, passwordSignIn: app.ctx.config.AUTH_PASSWORD },
        {
          token: request.params.token,
          signedIn: await signedInUser(request),
          account: request.body ?? undefined,
          headers: authHeaders(request),
        },
        new Date(),
      );
      if (result.setCookie.length > 0) reply.header('set-cookie', result.setCookie);
      return reply.code(201).send(ok(result.accepted));
    },
  );
}
