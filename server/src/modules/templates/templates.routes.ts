import type { FastifyInstance } from 'fastify';
import type { ZodTypeProvider } from 'fastify-type-provider-zod';
import { z } from 'zod';
import { access } from '../../http/access.ts';
import { deleted, deletedEnvelope, envelopeOf, ok, pageOf, queryInteger } from '../../http/envelope.ts';
import { actingUserIdOf, teamIdOf } from '../../http/principal.ts';
import { variablesLimitsOf } from '../rendering/index.ts';
import { duplicateTemplate } from './templates.duplicate.service.ts';
import { previewTemplate } from './templates.preview.service.ts';
import {
  createdTemplateView,
  createTemplateBody,
  createVersionBody,
  duplicatedTemplateView,
  previewBodySchema,
  previewView,
  templateIdParams,
  templateListItem,
  templateListQuery,
  templateVersionList,
  templateVersionParams,
  templateVersionView,
  templateView,
  updatedTemplateView,
  updateTemplateBody,
} from './templates.schema.ts';
import * as service from './templates.service.ts';
import { releaseThumbnail } from './templates.thumbnail.ts';
import * as versions from './templates.versions.service.ts';

const tags = ['Templates'];

/**
 * Template endpoints of the spec ("Templates (session)"): list, get (id or slug), create, update,
 * delete, duplicate, versions (list, create, restore) and preview. Reads, the version list and
 * preview need team membership only (issue #2: the spec leaves their permission open); creating a
 * version and restoring one change the template, so they need templates:update.
 */
export async function templateRoutes(fastify: FastifyInstance): Promise<void> {
  const app = fastify.withTypeProvider<ZodTypeProvider>();
  const db = () => app.ctx.database.db;
  // Thumbnail URLs are built from their stored keys with the storage as configured now.
  const storage = () => app.ctx.storage;
  const sendCache = () => app.ctx.caches.templatesForSend;
  // Saves queue a thumbnail (issue #12) when this process has a renderer to take it with.
  const thumbnails = () => (app.ctx.pdf ? app.ctx.queue : undefined);
  const previewBody = previewBodySchema(variablesLimitsOf(app.ctx.config));

  app.get(
    '/api/templates',
    {
      ...access({ kind: 'session', apiKeyScopes: ['templates:read'] }),
      schema: { tags, querystring: templateListQuery, response: { 200: pageOf(templateListItem) } },
    },
    async (request) => ok(await service.listTemplates(db(), storage(), teamIdOf(request), request.query)),
  );

  app.get(
    '/api/templates/:id',
    {
      ...access({ kind: 'session', apiKeyScopes: ['templates:read'] }),
      schema: { tags, params: templateIdParams, response: { 200: envelopeOf(templateView) } },
    },
    async (request) =>
      ok(
        service.presentTemplate(
          await service.getTemplate(db(), teamIdOf(request), request.params.id),
          storage(),
        ),
      ),
  );

  app.post(
    '/api/templates',
    {
      ...access({ kind: 'session', permission: 'templates:create', apiKeyScopes: ['templates:write'] }),
      schema: {
        tags,
        body: createTemplateBody,
        response: { 201: envelopeOf(createdTemplateView) },
      },
    },
    async (request, reply) => {
      const teamId = teamIdOf(request);
      const userId = actingUserIdOf(request);
      const created = await service.createTemplate(db(), teamId, userId, request.body, thumbnails());
      return reply.code(201).send(ok(service.presentTemplate(created, storage())));
    },
  );

  app.put(
    '/api/templates/:id',
    {
      ...access({ kind: 'session', permission: 'templates:update', apiKeyScopes: ['templates:write'] }),
      schema: {
        tags,
        params: templateIdParams,
        body: updateTemplateBody,
        response: { 200: envelopeOf(updatedTemplateView) },
      },
    },
    async (request) => {
      const row = await service.updateTemplate(
        db(),
        sendCache(),
        teamIdOf(request),
        request.params.id,
        request.body,
        thumbnails(),
      );
      return ok(service.presentTemplate(row, storage()));
    },
  );

  app.delete(
    '/api/templates/:id',
    {
      ...access({ kind: 'session', permission: 'templates:delete', apiKeyScopes: ['templates:delete'] }),
      schema: { tags, params: templateIdParams, response: { 200: deletedEnvelope } },
    },
    async (request) => {
      const teamId = teamIdOf(request);
      const { thumbnailKey } = await service.deleteTemplate(db(), sendCache(), teamId, request.params.id);
      // The template is gone; a storage failure only leaves its thumbnail file behind.
      await releaseThumbnail(db(), storage(), teamId, thumbnailKey).catch((error: unknown) =>
        request.log.warn({ err: error }, 'could not delete the deleted template’s thumbnail'),
      );
      return deleted;
    },
  );

  app.post(
    '/api/templates/:id/duplicate',
    {
      ...access({ kind: 'session', permission: 'templates:create', apiKeyScopes: ['templates:write'] }),
      schema: {
        tags,
        params: templateIdParams,
        response: { 201: envelopeOf(duplicatedTemplateView) },
      },
    },
    async (request, reply) => {
      const teamId = teamIdOf(request);
      const userId = actingUserIdOf(request);
      const copy = await duplicateTemplate(db(), teamId, userId, request.params.id, thumbnails());
      return reply.code(201).send(ok(copy));
    },
  );

  app.get(
    '/api/templates/:id/versions',
    {
      ...access({ kind: 'session', apiKeyScopes: ['templates:read'] }),
      schema: {
        tags,
        params: templateIdParams,
        querystring: z.object({
          limit: queryInteger({
            min: 1,
            max: versions.MAX_VERSIONS_LIMIT,
            fallback: versions.DEFAULT_VERSIONS_LIMIT,
          }).describe('The newest this many versions (default 100, at most 1,000)'),
        }),
        response: { 200: envelopeOf(templateVersionList) },
      },
    },
    async (request) =>
      ok(await versions.listVersions(db(), teamIdOf(request), request.params.id, request.query.limit)),
  );

  app.post(
    '/api/templates/:id/versions',
    {
      ...access({ kind: 'session', permission: 'templates:update', apiKeyScopes: ['templates:write'] }),
      schema: {
        tags,
        params: templateIdParams,
        body: createVersionBody,
        response: { 201: envelopeOf(templateVersionView) },
      },
    },
    async (request, reply) => {
      const teamId = teamIdOf(request);
      const userId = actingUserIdOf(request);
      const version = await versions.createVersion(
        db(),
        sendCache(),
        teamId,
        userId,
        request.params.id,
        request.body?.name,
      );
      return reply.code(201).send(ok(version));
    },
  );

  app.put(
    '/api/templates/:id/versions/:versionId/restore',
    {
      ...access({ kind: 'session', permission: 'templates:update', apiKeyScopes: ['templates:write'] }),
      schema: { tags, params: templateVersionParams, response: { 200: envelopeOf(templateView) } },
    },
    async (request) => {
      const teamId = teamIdOf(request);
      const userId = actingUserIdOf(request);
      const { id, versionId } = request.params;
      return ok(
        service.presentTemplate(
          await versions.restoreVersion(db(), sendCache(), teamId, userId, id, versionId, thumbnails()),
          storage(),
        ),
      );
    },
  );

  app.post(
    '/api/templates/:id/preview',
    {
      ...access({ kind: 'session', apiKeyScopes: ['templates:read'] }),
      schema: {
        tags,
        params: templateIdParams,
        body: previewBody,
        response: { 200: envelopeOf(previewView) },
      },
    },
    async (request) =>
      ok(await previewTemplate(db(), teamIdOf(request), request.params.id, request.body.variables)),
  );
}
