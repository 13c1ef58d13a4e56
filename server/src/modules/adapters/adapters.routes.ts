import type { FastifyInstance } from 'fastify';
import type { ZodTypeProvider } from 'fastify-type-provider-zod';
import { access } from '../../http/access.ts';
import { deleted, deletedEnvelope, envelopeOf, ok } from '../../http/envelope.ts';
import { sessionOf } from '../../http/principal.ts';
import { ADAPTER_TYPE_DESCRIPTORS } from './adapter-types.ts';
import {
  adapterIdParams,
  adapterTestResult,
  adapterTypeDescriptor,
  adapterView,
  adapterWithConfigView,
  createAdapterBody,
  createdAdapterView,
  updateAdapterBody,
  updatedAdapterView,
} from './adapters.schema.ts';
import * as service from './adapters.service.ts';

const tags = ['Adapters'];

/** Adapter endpoints of the spec ("Adapters (session)"); list and types need membership only (issue #2). */
export async function adapterRoutes(fastify: FastifyInstance): Promise<void> {
  const app = fastify.withTypeProvider<ZodTypeProvider>();
  const db = () => app.ctx.database.db;
  const key = () => app.ctx.encryptionKey;
  const sendCache = () => app.ctx.caches.adaptersForSend;

  app.get(
    '/api/adapters/types',
    {
      ...access({ kind: 'session' }),
      schema: { tags, response: { 200: envelopeOf(adapterTypeDescriptor.array()) } },
    },
    async () => ok([...ADAPTER_TYPE_DESCRIPTORS]),
  );

  app.get(
    '/api/adapters',
    {
      ...access({ kind: 'session' }),
      schema: { tags, response: { 200: envelopeOf(adapterView.array()) } },
    },
    async (request) => ok(await service.listAdapters(db(), sessionOf(request).teamId)),
  );

  app.get(
    '/api/adapters/:id',
    {
      ...access({ kind: 'session', permission: 'adapters:view-config' }),
      schema: {
        tags,
        params: adapterIdParams,
        response: { 200: envelopeOf(adapterWithConfigView) },
      },
    },
    async (request) =>
      ok(
        await service.getAdapterWithConfig(
          db(),
          key(),
          app.ctx.config.BASE_URL,
          sessionOf(request).teamId,
          request.params.id,
        ),
      ),
  );

  app.post(
    '/api/adapters',
    {
      ...access({ kind: 'session', permission: 'adapters:create' }),
      schema: { tags, body: createAdapterBody, response: { 201: envelopeOf(createdAdapterView) } },
    },
    async (request, reply) => {
      const row = await service.createAdapter(
        db(),
        sendCache(),
        key(),
        sessionOf(request).teamId,
        request.body,
      );
      return reply.code(201).send(ok(service.presentAdapter(row)));
    },
  );

  app.put(
    '/api/adapters/:id',
    {
      ...access({ kind: 'session', permission: 'adapters:update' }),
      schema: {
        tags,
        params: adapterIdParams,
        body: updateAdapterBody,
        response: { 200: envelopeOf(updatedAdapterView) },
      },
    },
    async (request) => {
      const row = await service.updateAdapter(
        db(),
        sendCache(),
        key(),
        sessionOf(request).teamId,
        request.params.id,
        request.body,
      );
      return ok(service.presentAdapter(row));
    },
  );

  app.delete(
    '/api/adapters/:id',
    {
      ...access({ kind: 'session', permission: 'adapters:delete' }),
      schema: { tags, params: adapterIdParams, response: { 200: deletedEnvelope } },
    },
    async (request) => {
      await service.deleteAdapter(db(), sendCache(), sessionOf(request).teamId, request.params.id);
      return deleted;
    },
  );

  app.post(
    '/api/adapters/:id/test',
    {
      ...access({ kind: 'session', permission: 'adapters:update' }),
      schema: { tags, params: adapterIdParams, response: { 200: envelopeOf(adapterTestResult) } },
    },
    async (request) =>
      ok(await service.testAdapter(db(), app.ctx, sessionOf(request).teamId, request.params.id)),
  );
}
