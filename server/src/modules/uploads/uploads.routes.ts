import multipart from '@fastify/multipart';
import type { FastifyInstance } from 'fastify';
import type { ZodTypeProvider } from 'fastify-type-provider-zod';
import { access } from '../../http/access.ts';
import { binaryResponse } from '../../http/access-docs.ts';
import { deleted, deletedEnvelope, envelopeOf, ok, pageOf, paginationQuery } from '../../http/envelope.ts';
import { notFound } from '../../http/errors.ts';
import { sessionOf } from '../../http/principal.ts';
import { IMMUTABLE_CACHE_CONTROL } from '../storage/index.ts';
import { readUploadedFile } from './uploads.multipart.ts';
import {
  publicFileParams,
  storedImageView,
  uploadedImageView,
  uploadImageForm,
  uploadKeyParams,
  uploadUsageView,
} from './uploads.schema.ts';
import * as service from './uploads.service.ts';

const tags = ['Uploads'];

/**
 * Image uploads for the builder (issue #4 "Uploads for the builder"):
 * - `POST /api/uploads/images` (multipart/form-data, one file in the field `file`; templates:update)
 *   → 201 `{url, key, contentType, size}`;
 * - `DELETE /api/uploads/images/:key` (key URL-encoded; templates:update) → `{success: true}`;
 * - `GET /api/uploads/images` (any member; page, pageSize) → the team's images, newest first;
 * - `GET /api/uploads/usage` (any member) → `{usedBytes, quotaBytes, files, maxFiles}`: each team
 *   keeps at most UPLOAD_TEAM_QUOTA_BYTES and UPLOAD_TEAM_MAX_FILES of images (session 16: 40 × 5 MB
 *   went in 1.6 s onto the disk the embedded PostgreSQL shares);
 * - `GET /files/*` (public, local disk only): the stored bytes with their content type.
 * Files go to the context's storage (`app.ctx.storage`, built and closed with the context, so the
 * worker reaches the same one). Register without fastify-plugin: @fastify/multipart's parser stays inside this scope, so every
 * other route still accepts JSON only.
 */
export async function uploadRoutes(fastify: FastifyInstance): Promise<void> {
  const app = fastify.withTypeProvider<ZodTypeProvider>();
  const { config, storage } = app.ctx;
  const deps = () => ({
    db: app.ctx.database.db,
    storage,
    quota: { quotaBytes: config.UPLOAD_TEAM_QUOTA_BYTES, maxFiles: config.UPLOAD_TEAM_MAX_FILES },
  });
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
        consumes: ['multipart/form-data'],
        body: uploadImageForm,
        description: `One PNG, JPEG, GIF or WebP image (detected from its content) in the form field \`file\`, at most ${config.UPLOAD_MAX_BYTES} bytes; a team keeps at most ${config.UPLOAD_TEAM_QUOTA_BYTES} bytes and ${config.UPLOAD_TEAM_MAX_FILES} images (FILE_TOO_LARGE, reason UPLOAD_QUOTA_EXCEEDED).`,
        response: { 201: envelopeOf(uploadedImageView) },
      },
    },
    async (request, reply) => {
      const { teamId } = sessionOf(request);
      const { bytes } = await readUploadedFile(request, 'file', config.UPLOAD_MAX_BYTES);
      return reply.code(201).send(ok(await service.storeImage(deps(), teamId, bytes)));
    },
  );

  app.delete(
    '/api/uploads/images/:key',
    {
      ...access({ kind: 'session', permission: 'templates:update' }),
      schema: { tags, params: uploadKeyParams, response: { 200: deletedEnvelope } },
    },
    async (request) => {
      await service.deleteImage(deps(), sessionOf(request).teamId, request.params.key);
      return deleted;
    },
  );

  app.get(
    '/api/uploads/images',
    {
      ...access({ kind: 'session' }),
      schema: {
        tags,
        description:
          "The team's uploaded images, newest first (images uploaded before upload quotas existed are not listed).",
        querystring: paginationQuery,
        response: { 200: pageOf(storedImageView) },
      },
    },
    async (request) => ok(await service.listImages(deps(), sessionOf(request).teamId, request.query)),
  );

  app.get(
    '/api/uploads/usage',
    {
      ...access({ kind: 'session' }),
      schema: { tags, response: { 200: envelopeOf(uploadUsageView) } },
    },
    async (request) => ok(await service.uploadUsage(deps(), sessionOf(request).teamId)),
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
        wildcardName: 'path',
        responseDocs: {
          200: binaryResponse(
            'The stored bytes, with the type detected at upload',
            Object.keys(service.IMAGE_TYPES),
          ),
        },
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
