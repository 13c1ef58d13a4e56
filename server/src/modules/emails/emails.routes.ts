import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import type { ZodTypeProvider } from 'fastify-type-provider-zod';
import { z } from 'zod';
import { access } from '../../http/access.ts';
import { envelopeOf, ok, pageOf } from '../../http/envelope.ts';
import { AppError } from '../../http/errors.ts';
import { apiKeyOf, principalOf, sessionOf, teamIdOf } from '../../http/principal.ts';
import { variablesLimitsOf, variablesSchema } from '../rendering/index.ts';
import { acceptSendBatch, MAX_BATCH_EMAILS } from './batch-send.service.ts';
import { cancelEmail } from './cancel.service.ts';
import { recipientView } from './email-recipients.ts';
import {
  acceptedSendView,
  emailHistoryEntryView,
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
import { idempotencyKeyOf, withIdempotency } from './idempotency.ts';
import * as logs from './logs.service.ts';
import { resendEmail } from './resend.service.ts';
import { acceptSend } from './send.service.ts';
import { refuseUnstorableStrings } from './send-fields.schema.ts';
import { sendTemplateTest } from './send-test.service.ts';

/** Body limit of `POST /api/v1/send`: 10 MB of attachments as base64 plus the rest (16 MB). */
const SEND_BODY_LIMIT_BYTES = 16 * 1024 * 1024;
/** Body limit of `POST /api/v1/send/batch` (32 MB). */
const BATCH_BODY_LIMIT_BYTES = 32 * 1024 * 1024;

const batchResultView = z.object({
  results: z.array(
    z.union([
      acceptedSendView,
      z.object({
        error: z.object({
          code: z.string(),
          message: z.string(),
          details: z.record(z.string(), z.unknown()),
        }),
      }),
    ]),
  ),
});

const cancelledView = z.object({ id: z.string(), status: z.literal('failed') });

/**
 * The public API (spec "Public API (API key)"): send and status; issue #10: batch send, cancel,
 * `Idempotency-Key` on both sends.
 */
export async function sendRoutes(fastify: FastifyInstance): Promise<void> {
  const app = fastify.withTypeProvider<ZodTypeProvider>();
  const tags = ['Sending'];
  const sendBody = sendBodySchema(variablesLimitsOf(app.ctx.config));
  // Sends still being committed finish before the database is closed after the app.
  app.addHook('onClose', () => app.ctx.acceptBatcher.drain());

  // Loose: the validated object replaces request.headers, which must keep every other header.
  const idempotencyHeader = z.looseObject({
    'idempotency-key': z
      .string()
      .optional()
      .describe('Optional, ≤ 256 characters: a repeat within 24 h gets the original response'),
  });

  /**
   * Answers 202 with `run()`'s body under the request's Idempotency-Key (issue #10, idempotency.ts):
   * a repeat of the same key and body gets the stored answer with `Idempotency-Replayed: true`.
   */
  const answerIdempotently = async (
    request: FastifyRequest,
    reply: FastifyReply,
    route: string,
    run: () => Promise<unknown>,
  ) => {
    const caller = apiKeyOf(request);
    const answer = await withIdempotency(
      app.ctx.database.db,
      caller,
      idempotencyKeyOf(request.headers['idempotency-key'] as string | undefined),
      { route, body: request.body },
      async () => ({ status: 202, body: await run() }),
    ).catch((error: unknown) => {
      // A key deleted since it was verified: this process stops serving it from its cache too.
      if (error instanceof AppError && error.code === 'INVALID_TOKEN')
        app.ctx.caches.apiKeys.evict(caller.apiKeyId);
      throw error;
    });
    if (answer.replayed) reply.header('idempotency-replayed', 'true');
    return reply.code(answer.status as 202).send(answer.body as never);
  };

  app.post(
    '/api/v1/send',
    {
      ...access({ kind: 'apiKey', scopes: ['send'] }),
      // 10 MB of attachments are ~13.4 MB as base64.
      bodyLimit: SEND_BODY_LIMIT_BYTES,
      schema: {
        tags,
        headers: idempotencyHeader,
        body: sendBody,
        response: { 202: envelopeOf(acceptedSendView) },
      },
      // The hot path's answer is built here from three strings (AcceptedSend): plain JSON.stringify
      // instead of a zod parse of it per request; the schema still documents it (OpenAPI).
      serializerCompiler: () => (data) => JSON.stringify(data),
    },
    async (request, reply) => {
      const caller = apiKeyOf(request);
      return answerIdempotently(request, reply, 'send', async () =>
        ok(await acceptSend(app.ctx, caller, request.body)),
      );
    },
  );

  const batchAccess = access({ kind: 'apiKey', scopes: ['send'] });
  app.post(
    '/api/v1/send/batch',
    {
      ...batchAccess,
      // Each item's strings are checked by the send body's schema: one bad item fails alone.
      config: { ...batchAccess.config, stringsCheckedPerItem: true },
      bodyLimit: BATCH_BODY_LIMIT_BYTES,
      schema: {
        tags,
        headers: idempotencyHeader,
        // Items are validated one by one (an invalid item fails alone), so the schema here only
        // bounds the list; each item is a send body.
        body: z.object({
          emails: z
            .array(z.unknown().describe('A body of POST /api/v1/send'))
            .min(1)
            .max(MAX_BATCH_EMAILS)
            .describe('1-100 send bodies; each is validated and accepted on its own'),
        }),
        response: { 202: envelopeOf(batchResultView) },
      },
    },
    async (request, reply) => {
      const caller = apiKeyOf(request);
      return answerIdempotently(request, reply, 'send/batch', async () =>
        ok({ results: await acceptSendBatch(app.ctx, caller, request.body.emails, sendBody) }),
      );
    },
  );

  app.post(
    '/api/v1/:id/cancel',
    {
      ...access({ kind: 'apiKey', scopes: ['send'] }),
      schema: { tags, params: emailIdParams, response: { 200: envelopeOf(cancelledView) } },
    },
    async (request) =>
      ok(
        await cancelEmail(
          { db: app.ctx.database.db, queue: app.ctx.queue },
          apiKeyOf(request).teamId,
          request.params.id,
        ),
      ),
  );

  app.get(
    '/api/v1/:id/status',
    {
      ...access({ kind: 'apiKey', scopes: ['send', 'logs:read'] }),
      schema: { tags, params: emailIdParams, response: { 200: envelopeOf(emailStatusView) } },
    },
    async (request) =>
      ok(await logs.getEmailStatus(app.ctx.database.db, principalOf(request).teamId, request.params.id)),
  );
}

/**
 * Email log endpoints (spec "Email logs (session)"): list and get, plus the log re-rendered from
 * its template version and variables (issue #4); and the dashboard's sends: resend and the
 * template's test send (issue #13), declared here because it is a send (the templates module is
 * below this one and cannot reach the send path).
 */
export async function logRoutes(fastify: FastifyInstance): Promise<void> {
  const app = fastify.withTypeProvider<ZodTypeProvider>();
  const tags = ['Email logs'];

  app.get(
    '/api/logs',
    {
      ...access({ kind: 'session', permission: 'logs:view', apiKeyScopes: ['logs:read'] }),
      schema: { tags, querystring: logListQuery, response: { 200: pageOf(logListItem) } },
    },
    async (request) => ok(await logs.listLogs(app.ctx.database.db, teamIdOf(request), request.query)),
  );

  app.get(
    '/api/logs/:id',
    {
      ...access({ kind: 'session', permission: 'logs:view', apiKeyScopes: ['logs:read'] }),
      schema: { tags, params: emailIdParams, response: { 200: envelopeOf(logView) } },
    },
    async (request) =>
      ok(await logs.getLogWithEvents(app.ctx.database.db, teamIdOf(request), request.params.id)),
  );

  app.get(
    '/api/logs/:id/events',
    {
      ...access({ kind: 'session', permission: 'logs:view', apiKeyScopes: ['logs:read'] }),
      schema: {
        tags,
        params: emailIdParams,
        response: { 200: envelopeOf(emailHistoryEntryView.array()) },
      },
    },
    async (request) =>
      ok(await logs.getEmailHistory(app.ctx.database.db, teamIdOf(request), request.params.id)),
  );

  app.get(
    '/api/logs/:id/recipients',
    {
      ...access({ kind: 'session', permission: 'logs:view', apiKeyScopes: ['logs:read'] }),
      schema: { tags, params: emailIdParams, response: { 200: envelopeOf(recipientView.array()) } },
    },
    async (request) =>
      ok(await logs.getLogRecipients(app.ctx.database.db, teamIdOf(request), request.params.id)),
  );

  app.get(
    '/api/logs/:id/rendered',
    {
      ...access({ kind: 'session', permission: 'logs:view', apiKeyScopes: ['logs:read'] }),
      schema: { tags, params: emailIdParams, response: { 200: envelopeOf(renderedEmailView) } },
    },
    async (request) => ok(await logs.rerenderLog(app.ctx.database.db, teamIdOf(request), request.params.id)),
  );

  app.get(
    '/api/logs/stats',
    {
      ...access({ kind: 'session', permission: 'logs:view', apiKeyScopes: ['logs:read'] }),
      schema: { tags, querystring: statsQuery, response: { 200: envelopeOf(statsView) } },
    },
    async (request) => ok(await logs.getLogStats(app.ctx.database.db, teamIdOf(request), request.query)),
  );

  app.post(
    '/api/logs/:id/resend',
    {
      ...access({ kind: 'session', permission: 'logs:resend' }),
      schema: { tags, params: emailIdParams, response: { 202: envelopeOf(acceptedSendView) } },
    },
    async (request, reply) => {
      const accepted = await resendEmail(app.ctx, teamIdOf(request), request.params.id);
      return reply.code(202).send(ok(accepted));
    },
  );

  // Issue #13: a send like resend, so the same permission (logs:resend: owner, admin, member) and
  // sessions only (an API key sends through POST /api/v1/send, to any recipient it names).
  app.post(
    '/api/templates/:id/send-test',
    {
      ...access({ kind: 'session', permission: 'logs:resend' }),
      schema: {
        tags: ['Templates'],
        summary: "Send the template's current version to the signed-in user's own address",
        description:
          "Rendered with `variables` (default {}), through the team's default adapter or `adapterId`, " +
          "to the session user's account email only; subject unprefixed; the log's metadata has " +
          'testSend "true". Answers as POST /api/v1/send (202, the email log id) with its errors; ' +
          "another team's template is 404.",
        params: emailIdParams,
        body: z
          .object({
            variables: variablesSchema(variablesLimitsOf(app.ctx.config))
              // Stored as the log's jsonb: what PostgreSQL refuses is a VALIDATION_ERROR here.
              .superRefine((variables, ctx) => refuseUnstorableStrings(variables, ctx))
              .optional(),
            adapterId: z.string().min(1).max(200).optional(),
          })
          .nullish(),
        response: { 202: envelopeOf(acceptedSendView) },
      },
    },
    async (request, reply) => {
      const session = sessionOf(request);
      const accepted = await sendTemplateTest(
        app.ctx,
        { teamId: session.teamId, userId: session.userId },
        request.params.id,
        request.body ?? {},
      );
      return reply.code(202).send(ok(accepted));
    },
  );
}
