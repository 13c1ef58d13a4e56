import type { FastifyInstance } from 'fastify';
import type { ZodTypeProvider } from 'fastify-type-provider-zod';
import { access } from '../../http/access.ts';
import { deleted, deletedEnvelope, envelopeOf, ok } from '../../http/envelope.ts';
import { sessionOf } from '../../http/principal.ts';
import {
  apiKeyIdParams,
  apiKeyView,
  createApiKeyBody,
  createdApiKeyView,
  listApiKeysQuery,
  regeneratedApiKeyView,
  updateApiKeyBody,
  updatedApiKeyView,
} from './api-keys.schema.ts';
import * as service from './api-keys.service.ts';

const tags = ['API keys'];

/** The six API-key endpoints of the spec ("API keys (session)"); the list filters by creator (issue #8). */
export async function apiKeyRoutes(fastify: FastifyInstance): Promise<void> {
  const app = fastify.withTypeProvider<ZodTypeProvider>();
  const db = () => app.ctx.database.db;
  const cache = () => app.ctx.caches.apiKeys;

  app.get(
    '/api/api-keys',
    {
      ...access({ kind: 'session', permission: 'api-keys:view' }),
      schema: {
        tags,
        querystring: listApiKeysQuery,
        response: { 200: envelopeOf(apiKeyView.array()) },
      },
    },
    async (request) => ok(await service.listApiKeys(db(), sessionOf(request).teamId, request.query)),
  );

  app.get(
    '/api/api-keys/:id',
    {
      ...access({ kind: 'session', permission: 'api-keys:view' }),
      schema: { tags, params: apiKeyIdParams, response: { 200: envelopeOf(apiKeyView) } },
    },
    async (request) => ok(await service.getApiKey(db(), sessionOf(request).teamId, request.params.id)),
  );

  app.post(
    '/api/api-keys',
    {
      ...access({ kind: 'session', permission: 'api-keys:create' }),
      schema: { tags, body: createApiKeyBody, response: { 201: envelopeOf(createdApiKeyView) } },
    },
    async (request, reply) => {
      const { teamId, userId } = sessionOf(request);
      const created = await service.createApiKey(db(), teamId, userId, request.body);
      return reply.code(201).send(ok(created));
    },
  );

  app.put(
    '/api/api-keys/:id',
    {
      ...access({ kind: 'session', permission: 'api-keys:create' }),
      schema: {
        tags,
        params: apiKeyIdParams,
        body: updateApiKeyBody,
        response: { 200: envelopeOf(updatedApiKeyView) },
      },
    },
    async (request) =>
      ok(
        await service.updateApiKey(db(), cache(), sessionOf(request).teamId, request.params.id, request.body),
      ),
  );

  app.delete(
    '/api/api-keys/:id',
    {
      ...access({ kind: 'session', permission: 'api-keys:delete' }),
      schema: { tags, params: apiKeyIdParams, response: { 200: deletedEnvelope } },
    },
    async (request) => {
      await service.deleteApiKey(db(), cache(), sessionOf(request).teamId, request.params.id);
      return deleted;
    },
  );

  app.post(
    '/api/api-keys/:id/regenerate',
    {
      ...access({ kind: 'session', permission: 'api-keys:create' }),
      schema: {
        tags,
        params: apiKeyIdParams,
        response: { 200: envelopeOf(regeneratedApiKeyView) },
      },
    },
    async (request) =>
      ok(await service.regenerateApiKey(db(), cache(), sessionOf(request).teamId, request.params.id)),
  );
}
