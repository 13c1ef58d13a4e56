import type { FastifyInstance } from 'fastify';
import type { ZodTypeProvider } from 'fastify-type-provider-zod';
import { envelopeOf, ok, pageOf } from '../../http/envelope.ts';
import { principalOf, sessionOf } from '../../http/principal.ts';
import { requireApiKey } from '../api-keys/index.ts';
import { requireSession } from '../auth/index.ts';
import {
  acceptedSendView,
  emailIdParams,
  emailStatusView,
  logListItem,
  logListQuery,
  logView,
  sendBody,
} from './emails.schema.ts';
import * as logs from './logs.service.ts';
import { acceptSend } from './send.service.ts';

/** The public API (spec "Public API (API key)"): send and status. */
export async function sendRoutes(fastify: FastifyInstance): Promise<void> {
  const app = fastify.withTypeProvider<ZodTypeProvider>();
  const tags = ['Sending'];
  const security = [{ apiKey: [] }];

  app.post(
    '/api/v1/send',
    {
      preValidation: requireApiKey('send'),
      schema: { tags, security, body: sendBody, response: { 202: envelopeOf(acceptedSendView) } },
    },
    async (request, reply) => {
      const caller = principalOf(request);
      if (caller.kind !== 'apiKey') throw new Error('send requires an API key principal');
      const { database, queue, config } = app.ctx;
      const accepted = await acceptSend({ db: database.db, queue, config }, caller, request.body);
      return reply.code(202).send(ok(accepted));
    },
  );

  app.get(
    '/api/v1/:id/status',
    {
      preValidation: requireApiKey('send', 'logs:read'),
      schema: { tags, security, params: emailIdParams, response: { 200: envelopeOf(emailStatusView) } },
    },
    async (request) =>
      ok(await logs.getEmailStatus(app.ctx.database.db, principalOf(request).teamId, request.params.id)),
  );
}

/** Email log endpoints (spec "Email logs (session)"): list and get. */
export async function logRoutes(fastify: FastifyInstance): Promise<void> {
  const app = fastify.withTypeProvider<ZodTypeProvider>();
  const tags = ['Email logs'];
  const security = [{ session: [] }];

  app.get(
    '/api/logs',
    {
      preValidation: requireSession('logs:view'),
      schema: { tags, security, querystring: logListQuery, response: { 200: pageOf(logListItem) } },
    },
    async (request) => ok(await logs.listLogs(app.ctx.database.db, sessionOf(request).teamId, request.query)),
  );

  app.get(
    '/api/logs/:id',
    {
      preValidation: requireSession('logs:view'),
      schema: { tags, security, params: emailIdParams, response: { 200: envelopeOf(logView) } },
    },
    async (request) =>
      ok(await logs.getLogWithEvents(app.ctx.database.db, sessionOf(request).teamId, request.params.id)),
  );
}
