import type { FastifyInstance } from 'fastify';
import type { ZodTypeProvider } from 'fastify-type-provider-zod';
import { access } from '../../http/access.ts';
import { deleted, deletedEnvelope, envelopeOf, ok } from '../../http/envelope.ts';
import { sessionOf } from '../../http/principal.ts';
import {
  createdWebhookView,
  createWebhookBody,
  deliveryParams,
  deliveryView,
  listDeliveriesQuery,
  rotatedSecretView,
  updatedWebhookView,
  updateWebhookBody,
  webhookIdParams,
  webhookView,
} from './webhooks.schema.ts';
import * as service from './webhooks.service.ts';

const tags = ['Webhooks'];

/**
 * The webhook endpoints of the spec ("Webhooks (session)": list, get and create need
 * webhooks:create, update webhooks:update, delete webhooks:delete) and issue #11's rotate-secret,
 * test and redeliver (webhooks:update) and deliveries list (webhooks:create).
 */
export async function webhookRoutes(fastify: FastifyInstance): Promise<void> {
  const app = fastify.withTypeProvider<ZodTypeProvider>();
  const deps = () => ({
    db: app.ctx.database.db,
    config: app.ctx.config,
    encryptionKey: app.ctx.encryptionKey,
  });
  const db = () => app.ctx.database.db;

  app.get(
    '/api/webhooks',
    {
      ...access({ kind: 'session', permission: 'webhooks:create' }),
      schema: { tags, response: { 200: envelopeOf(webhookView.array()) } },
    },
    async (request) => ok(await service.listWebhooks(db(), sessionOf(request).teamId)),
  );

  app.get(
    '/api/webhooks/:id',
    {
      ...access({ kind: 'session', permission: 'webhooks:create' }),
      schema: { tags, params: webhookIdParams, response: { 200: envelopeOf(webhookView) } },
    },
    async (request) => ok(await service.getWebhook(db(), sessionOf(request).teamId, request.params.id)),
  );

  app.post(
    '/api/webhooks',
    {
      ...access({ kind: 'session', permission: 'webhooks:create' }),
      schema: { tags, body: createWebhookBody, response: { 201: envelopeOf(createdWebhookView) } },
    },
    async (request, reply) => {
      const created = await service.createWebhook(deps(), sessionOf(request).teamId, request.body);
      return reply.code(201).send(ok(created));
    },
  );

  app.put(
    '/api/webhooks/:id',
    {
      ...access({ kind: 'session', permission: 'webhooks:update' }),
      schema: {
        tags,
        params: webhookIdParams,
        body: updateWebhookBody,
        response: { 200: envelopeOf(updatedWebhookView) },
      },
    },
    async (request) =>
      ok(await service.updateWebhook(deps(), sessionOf(request).teamId, request.params.id, request.body)),
  );

  app.delete(
    '/api/webhooks/:id',
    {
      ...access({ kind: 'session', permission: 'webhooks:delete' }),
      schema: { tags, params: webhookIdParams, response: { 200: deletedEnvelope } },
    },
    async (request) => {
      await service.deleteWebhook(db(), sessionOf(request).teamId, request.params.id);
      return deleted;
    },
  );

  app.post(
    '/api/webhooks/:id/rotate-secret',
    {
      ...access({ kind: 'session', permission: 'webhooks:update' }),
      schema: { tags, params: webhookIdParams, response: { 200: envelopeOf(rotatedSecretView) } },
    },
    async (request) =>
      ok(await service.rotateWebhookSecret(deps(), sessionOf(request).teamId, request.params.id)),
  );

  app.post(
    '/api/webhooks/:id/test',
    {
      ...access({ kind: 'session', permission: 'webhooks:update' }),
      schema: { tags, params: webhookIdParams, response: { 200: envelopeOf(deliveryView) } },
    },
    async (request) => ok(await service.testWebhook(deps(), sessionOf(request).teamId, request.params.id)),
  );

  app.get(
    '/api/webhooks/:id/deliveries',
    {
      ...access({ kind: 'session', permission: 'webhooks:create' }),
      schema: {
        tags,
        params: webhookIdParams,
        querystring: listDeliveriesQuery,
        response: { 200: envelopeOf(deliveryView.array()) },
      },
    },
    async (request) =>
      ok(await service.listDeliveries(db(), sessionOf(request).teamId, request.params.id, request.query)),
  );

  app.post(
    '/api/webhooks/:id/deliveries/:deliveryId/redeliver',
    {
      ...access({ kind: 'session', permission: 'webhooks:update' }),
      schema: { tags, params: deliveryParams, response: { 200: envelopeOf(deliveryView) } },
    },
    async (request) =>
      ok(
        await service.redeliver(
          deps(),
          sessionOf(request).teamId,
          request.params.id,
          request.params.deliveryId,
        ),
      ),
  );
}
