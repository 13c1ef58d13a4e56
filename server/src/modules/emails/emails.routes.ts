import type { FastifyInstance } from 'fastify';
import type { ZodTypeProvider } from 'fastify-type-provider-zod';
import { access } from '../../http/access.ts';
import { envelopeOf, ok, pageOf } from '../../http/envelope.ts';
import { apiKeyOf, principalOf, teamIdOf } from '../../http/principal.ts';
import { variablesLimitsOf } from '../rendering/index.ts';
import {
  acceptedSendView,
  emailIdParams,
  emailStatusView,
  logListItem,
  logListQuery,
  logView,
  renderedEmailView,
  sendBodySchema,
  statsQuery,
  statsView,
} from './emails.schema.ts';
import * as logs from './logs.service.ts';
import { resendEmail } from './resend.service.ts';
import { acceptSend } from './send.service.ts';

/** The public API (spec "Public API (API key)"): send and status. */
export async function sendRoutes(fastify: FastifyInstance): Promise<void> {
  const app = fastify.withTypeProvider<ZodTypeProvider>();
  const tags = ['Sending'];
  const security = [{ apiKey: [] }];
  const sendBody = sendBodySchema(variablesLimitsOf(app.ctx.config));
  // Sends still being committed finish before the database is closed after the app.
  app.addHook('onClose', () => app.ctx.acceptBatcher.drain());

  app.post(
    '/api/v1/send',
    {
      ...access({ kind: 'apiKey', scopes: ['send'] }),
      schema: { tags, security, body: sendBody, response: { 202: envelopeOf(acceptedSendView) } },
    },
    async (request, reply) => {
      const caller = apiKeyOf(request);
      const accepted = await acceptSend(app.ctx, caller, request.body);
      return reply.code(202).send(ok(accepted));
    },
  );

  app.get(
    '/api/v1/:id/status',
    {
      ...access({ kind: 'apiKey', scopes: ['send', 'logs:read'] }),
      schema: { tags, security, params: emailIdParams, response: { 200: envelopeOf(emailStatusView) } },
    },
    async (request) =>
      ok(await logs.getEmailStatus(app.ctx.database.db, principalOf(request).teamId, request.params.id)),
  );
}

/**
 * Email log endpoints (spec "Email logs (session)"): list and get, plus the log re-rendered from
 * its template version and variables (issue #4).
 */
export async function logRoutes(fastify: FastifyInstance): Promise<void> {
  const app = fastify.withTypeProvider<ZodTypeProvider>();
  const tags = ['Email logs'];
  const security = [{ session: [] }];

  app.get(
    '/api/logs',
    {
      ...access({ kind: 'session', permission: 'logs:view', apiKeyScopes: ['logs:read'] }),
      schema: { tags, security, querystring: logListQuery, response: { 200: pageOf(logListItem) } },
    },
    async (request) => ok(await logs.listLogs(app.ctx.database.db, teamIdOf(request), request.query)),
  );

  app.get(
    '/api/logs/:id',
    {
      ...access({ kind: 'session', permission: 'logs:view', apiKeyScopes: ['logs:read'] }),
      schema: { tags, security, params: emailIdParams, response: { 200: envelopeOf(logView) } },
    },
    async (request) =>
      ok(await logs.getLogWithEvents(app.ctx.database.db, teamIdOf(request), request.params.id)),
  );

  app.get(
    '/api/logs/:id/rendered',
    {
      ...access({ kind: 'session', permission: 'logs:view', apiKeyScopes: ['logs:read'] }),
      schema: { tags, security, params: emailIdParams, response: { 200: envelopeOf(renderedEmailView) } },
    },
    async (request) => ok(await logs.rerenderLog(app.ctx.database.db, teamIdOf(request), request.params.id)),
  );

  app.get(
    '/api/logs/stats',
    {
      ...access({ kind: 'session', permission: 'logs:view', apiKeyScopes: ['logs:read'] }),
      schema: { tags, security, querystring: statsQuery, response: { 200: envelopeOf(statsView) } },
    },
    async (request) => ok(await logs.getLogStats(app.ctx.database.db, teamIdOf(request), request.query)),
  );

  app.post(
    '/api/logs/:id/resend',
    {
      ...access({ kind: 'session', permission: 'logs:resend' }),
      schema: { tags, security, params: emailIdParams, response: { 202: envelopeOf(acceptedSendView) } },
    },
    async (request, reply) => {
      const accepted = await resendEmail(app.ctx, teamIdOf(request), request.params.id);
      return reply.code(202).send(ok(accepted));
    },
  );
}
