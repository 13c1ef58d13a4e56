import type { FastifyInstance } from 'fastify';
import type { ZodTypeProvider } from 'fastify-type-provider-zod';
import { deleted, deletedEnvelope, envelopeOf, ok, pageOf } from '../../http/envelope.ts';
import { sessionOf } from '../../http/principal.ts';
import { requireSession } from '../auth/index.ts';
import {
  createdTemplateView,
  createTemplateBody,
  templateIdParams,
  templateListItem,
  templateListQuery,
  templateView,
  updatedTemplateView,
  updateTemplateBody,
} from './templates.schema.ts';
import * as service from './templates.service.ts';

const tags = ['Templates'];
const security = [{ session: [] }];

/**
 * Template endpoints of the spec ("Templates (session)"): list, get (id or slug), create, update, delete.
 * Reads need team membership only (issue #2: the spec leaves their permission open).
 */
export async function templateRoutes(fastify: FastifyInstance): Promise<void> {
  const app = fastify.withTypeProvider<ZodTypeProvider>();
  const db = () => app.ctx.database.db;

  app.get(
    '/api/templates',
    {
      preValidation: requireSession(),
      schema: { tags, security, querystring: templateListQuery, response: { 200: pageOf(templateListItem) } },
    },
    async (request) => ok(await service.listTemplates(db(), sessionOf(request).teamId, request.query)),
  );

  app.get(
    '/api/templates/:id',
    {
      preValidation: requireSession(),
      schema: { tags, security, params: templateIdParams, response: { 200: envelopeOf(templateView) } },
    },
    async (request) =>
      ok(
        service.presentTemplate(
          await service.getTemplate(db(), sessionOf(request).teamId, request.params.id),
        ),
      ),
  );

  app.post(
    '/api/templates',
    {
      preValidation: requireSession('templates:create'),
      schema: {
        tags,
        security,
        body: createTemplateBody,
        response: { 201: envelopeOf(createdTemplateView) },
      },
    },
    async (request, reply) => {
      const { teamId, userId } = sessionOf(request);
      const created = await service.createTemplate(db(), teamId, userId, request.body);
      return reply.code(201).send(ok(created));
    },
  );

  app.put(
    '/api/templates/:id',
    {
      preValidation: requireSession('templates:update'),
      schema: {
        tags,
        security,
        params: templateIdParams,
        body: updateTemplateBody,
        response: { 200: envelopeOf(updatedTemplateView) },
      },
    },
    async (request) => {
      const row = await service.updateTemplate(
        db(),
        sessionOf(request).teamId,
        request.params.id,
        request.body,
      );
      return ok(service.presentTemplate(row));
    },
  );

  app.delete(
    '/api/templates/:id',
    {
      preValidation: requireSession('templates:delete'),
      schema: { tags, security, params: templateIdParams, response: { 200: deletedEnvelope } },
    },
    async (request) => {
      await service.deleteTemplate(db(), sessionOf(request).teamId, request.params.id);
      return deleted;
    },
  );
}
