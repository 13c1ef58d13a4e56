import type { FastifyInstance } from 'fastify';
import type { ZodTypeProvider } from 'fastify-type-provider-zod';
import { z } from 'zod';
import { access } from '../../http/access.ts';
import { deleted, deletedEnvelope, envelopeOf, ok, pageOf } from '../../http/envelope.ts';
import { teamIdOf } from '../../http/principal.ts';
import {
  addSuppression,
  createSuppressionBody,
  listSuppressions,
  removeSuppression,
  suppressionListQuery,
  suppressionView,
} from './suppressions.service.ts';

/**
 * `GET/POST/DELETE /api/suppressions` (issue #10): the team's suppression list; reading needs
 * logs:view (or an API key with logs:read), changing it logs:resend.
 */
export async function suppressionRoutes(fastify: FastifyInstance): Promise<void> {
  const app = fastify.withTypeProvider<ZodTypeProvider>();
  const tags = ['Suppressions'];

  app.get(
    '/api/suppressions',
    {
      ...access({ kind: 'session', permission: 'logs:view', apiKeyScopes: ['logs:read'] }),
      schema: {
        tags,
        querystring: suppressionListQuery,
        response: { 200: pageOf(suppressionView) },
      },
    },
    async (request) => ok(await listSuppressions(app.ctx.database.db, teamIdOf(request), request.query)),
  );

  app.post(
    '/api/suppressions',
    {
      ...access({ kind: 'session', permission: 'logs:resend' }),
      schema: { tags, body: createSuppressionBody, response: { 201: envelopeOf(suppressionView) } },
    },
    async (request, reply) =>
      reply.code(201).send(ok(await addSuppression(app.ctx.database.db, teamIdOf(request), request.body))),
  );

  app.delete(
    '/api/suppressions/:id',
    {
      ...access({ kind: 'session', permission: 'logs:resend' }),
      schema: {
        tags,
        params: z.object({ id: z.string().min(1) }),
        response: { 200: deletedEnvelope },
      },
    },
    async (request) => {
      await removeSuppression(app.ctx.database.db, teamIdOf(request), request.params.id);
      return deleted;
    },
  );
}
