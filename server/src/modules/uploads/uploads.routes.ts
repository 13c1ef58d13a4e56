import multipart from '@fastify/multipart';
import type { FastifyInstance } from 'fastify';
import type { ZodTypeProvider } from 'fastify-type-provider-zod';
import { access } from '../../http/access.ts';
import { deleted, deletedEnvelope, envelopeOf, ok } from '../../http/envelope.ts';
import { notFound } from '../../http/errors.ts';
import { sessionOf } from '../../http/principal.ts';
import { IMMUTABLE_CACHE_CONTROL } from '../storage/index.ts';
import { readUploadedFile } from './uploads.multipart.ts';
import { publicFileParams, uploadedImageView, uploadImageForm, uploadKeyParams } from './uploads.schema.ts';
import * as service from './uploads.service.ts';

const tags = ['Uploads'];
const security = [{ session: [] }];

/**
 * Image uploads for the builder (issue #4 "Uploads for the builder"):
 * - `POST /api/uploads/images` (multipart/form-data, one file in the field `file`; templates:update)
 *   → 201 `{url, key, contentType, size}`;
 * - `DELETE /api/uploads/images/:key` (key URL-encoded; templates:update) → `{success: true}`;
 * - `GET /files/*` (public, local disk only): the stored bytes with their content type.
 * Files go to the context's storage (`app.ctx.storage`, built and closed with the context, so the
 * worker reaches the same one). Register without fastify-plugin: @fastify/multipart's parser stays inside this scope, so every
 * other route still accepts JSON only.
 */
export async function uploadRoutes(fastify: FastifyInstance): Promise<void> {
  const app = fastify.withTypeProvider<ZodTypeProvider>();
  const { config, storage } = app.ctx;
  if (storage.kind === 'unconfigured') {
    app.log.warn(
      'STORAGE=s3 without S3_BUCKET (or with half the credentials): uploads answer S3_NOT_CONFIGURED',
    );
  }

  await app.register(multipart, {
    limits: { fileSize: config.UPLOAD_MAX_BYTES, files: 1, fields: 10, parts: 20 },
  });

  app.post(
    '/api/uploads/images',
    {
      ...access({ kind: 'session', permission: 'templates:update' }),
      // The form is streamed by the handler (size cap, type from content): its schema documents it only.
      validatorCompiler: () => (value) => ({ value }),
      schema: {
        tags,
        security,
        consumes: ['multipart/form-data'],
        body: uploadImageForm,
        description: `One PNG, JPEG, GIF or WebP image (detected from its content) in the form field \`file\`, at most ${config.UPLOAD_MAX_BYTES} bytes.`,
        response: { 201: envelopeOf(uploadedImageView) },
      },
    },
    async (request, reply) => {
      const { teamId } = sessionOf(request);
      const { bytes } = await readUploadedFile(request, 'file', config.UPLOAD_MAX_BYTES);
      return reply.code(201).send(ok(await service.storeImage(storage, teamId, bytes)));
    },
  );

  app.delete(
    '/api/uploads/images/:key',
    {
      ...access({ kind: 'session', permission: 'templates:update' }),
      schema: { tags, security, params: uploadKeyParams, response: { 200: deletedEnvelope } },
    },
    async (request) => {
      await service.deleteImage(storage, sessionOf(request).teamId, request.params.key);
      return deleted;
    },
  );

  // S3 objects are served by S3 (or S3_PUBLIC_URL) itself; only the local disk needs this route.
  if (storage.kind !== 'local') return;
  app.get(
    '/files/*',
    {
      ...access({ kind: 'public' }),
      schema: {
        tags,
        description: 'A stored file, public (images in emails load without authentication).',
        params: publicFileParams,
      },
    },
    async (request, reply) => {
      const file = await storage.get(request.params['*']);
      if (!file) throw notFound('File');
      return reply
        .type(file.contentType)
        .header('content-length', file.size)
        .header('cache-control', IMMUTABLE_CACHE_CONTROL)
        .header('x-content-type-options', 'nosniff')
        .header('content-security-policy', "default-src 'none'; sandbox")
        .send(file.body);
    },
  );
}
