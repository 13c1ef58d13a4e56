import { toNodeHandler } from 'better-auth/node';
import type { FastifyInstance, FastifyRequest } from 'fastify';
import { isClientDataError } from '../../db/errors.ts';
import { AppError } from '../../http/errors.ts';
import { errorForLog } from '../../http/log-redaction.ts';
import { envelopeResponse, presentAuthResponse, presentOAuthCallbackFailure } from './auth-error-envelope.ts';
import { CLIENT_IP_HEADER, loginUrl } from './auth-light.ts';

/**
 * Largest request body accepted by better-auth's endpoints. better-call streams the raw body
 * without a limit of its own, and these endpoints are reachable without authentication.
 */
export const AUTH_BODY_LIMIT_BYTES = 64 * 1024;

/** Refuses bodies better-call would read without bound: oversized or of unknown length. */
function checkBodySize(request: FastifyRequest): void {
  const length = request.headers['content-length'];
  if (length === undefined) {
    if (request.headers['transfer-encoding']) {
      throw new AppError('INVALID_INPUT', 'Content-Length is required', {
        reason: 'CONTENT_LENGTH_REQUIRED',
      });
    }
    return;
  }
  if (Number(length) > AUTH_BODY_LIMIT_BYTES) {
    throw new AppError('INVALID_INPUT', `Request body exceeds ${AUTH_BODY_LIMIT_BYTES} bytes`, {
      reason: 'BODY_TOO_LARGE',
    });
  }
}

/**
 * Mounts better-auth at `/api/auth/*` (GET, POST) in its own encapsulated scope (ARCHITECTURE.md
 * "Auth notes"): Fastify's body parsers are removed and a catch-all parser leaves the body
 * stream unread for better-auth, which is served by `toNodeHandler` on the raw request after
 * `reply.hijack()`. On the way in the client IP (`request.ip`) is put in
 * {@link CLIENT_IP_HEADER} for its rate limiter; on the way out its errors are re-rendered in
 * our envelope (see `presentAuthResponse`), and so are failed OAuth callbacks for API callers
 * (`presentOAuthCallbackFailure`). Our own static routes under `/api/auth` win over
 * this wildcard in Fastify's router.
 */
export async function betterAuthMount(app: FastifyInstance): Promise<void> {
  app.removeAllContentTypeParsers();
  app.addContentTypeParser('*', (_request, _payload, done) => done(null, undefined));

  const handler = toNodeHandler(async (request: Request): Promise<Response> => {
    try {
      const response = await presentAuthResponse(await app.ctx.auth.handler(request));
      return presentOAuthCallbackFailure(request, response, loginUrl(app.ctx.config));
    } catch (error) {
      // Values the database refuses (a NUL byte in a name, …) are the client's: 400, as on our
      // own routes (http/error-handler.ts).
      if (isClientDataError(error)) {
        return envelopeResponse(
          new AppError('INVALID_INPUT', 'The request contains text or data the database cannot store', {
            reason: 'UNSUPPORTED_DATA',
          }),
        );
      }
      // Its errors can be database errors whose message carries the statement's parameters.
      app.log.error({ err: errorForLog(error) }, 'better-auth handler failed');
      return envelopeResponse(new AppError('INTERNAL_ERROR', 'Internal server error'));
    }
  });

  app.route({
    method: ['GET', 'POST'],
    url: '/api/auth/*',
    // better-auth authenticates its own endpoints (route table rule: http/access.ts).
    config: { access: { kind: 'public' } },
    schema: { hide: true },
    handler: async (request, reply) => {
      checkBodySize(request);
      request.raw.headers[CLIENT_IP_HEADER] = request.ip;
      reply.hijack();
      try {
        await handler(request.raw, reply.raw);
      } catch (error) {
        request.log.error({ err: errorForLog(error), reqId: request.id }, 'better-auth response failed');
        if (!reply.raw.headersSent) reply.raw.writeHead(500).end();
        else reply.raw.destroy();
      }
    },
  });
}
