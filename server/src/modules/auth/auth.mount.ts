import { toNodeHandler } from 'better-auth/node';
import type { FastifyInstance, FastifyRequest } from 'fastify';
import { isClientDataError, isNotNullViolation } from '../../db/errors.ts';
import { AppError } from '../../http/errors.ts';
import { illFormedStringErrorInText } from '../../http/json-body-checks.ts';
import { errorForLog } from '../../http/log-redaction.ts';
import { envelopeResponse, presentAuthResponse, presentOAuthCallbackFailure } from './auth-error-envelope.ts';
import { CLIENT_IP_HEADER, loginUrl } from './auth-light.ts';
import { assertSameOrigin } from './request-auth.ts';
import { withoutSessionTokens } from './session-token-output.ts';

/**
 * Largest request body accepted by better-auth's endpoints. better-call streams the raw body
 * without a limit of its own, and these endpoints are reachable without authentication.
 */
export const AUTH_BODY_LIMIT_BYTES = 64 * 1024;

/**
 * better-auth's endpoints open over HTTP (paths after `/api/auth`): what the dashboard, its sign-ins
 * and API clients of a session use (all described in the OpenAPI document, auth-docs.ts). Every other path under `/api/auth/*` that is not one of our own routes answers 404
 * NOT_FOUND before better-auth sees it (security review, session 12), so that a session cookie, or
 * a script running with it, reaches nothing more. Closed that way, among others: `/get-access-token`,
 * `/refresh-token` and `/account-info`, which hand out or use the identity provider's OAuth tokens
 * kept for the account; `/link-social`, `/unlink-account` and `/list-accounts`, where linking
 * another provider's identity to a signed-in user would let whoever controls it sign in as that
 * user later, around the sign-in rules (sign-up-policy.ts, verified-email-reclaim.ts);
 * `/revoke-session`, which takes a session token no response hands out any more
 * ({@link withoutSessionTokens}; sign-out, `/revoke-sessions` and `/revoke-other-sessions` remain);
 * `/update-session`; `/delete-user`, which would take a user out of their teams around the team
 * routes' last-owner rule; password reset, email verification and email change, for which no
 * mail is configured; `/verify-password`, a guessing oracle; and whatever endpoints a later
 * better-auth adds. An exact match on the path as sent: better-auth's router does not decode
 * percent-escapes or fold slashes either (`server/test/auth-surface.test.ts`).
 */
export const OPEN_AUTH_PATHS: ReadonlySet<string> = new Set([
  '/sign-in/email',
  '/sign-up/email', // refused by configuration (disableSignUp): accounts come from setup and invitations
  '/sign-out',
  '/get-session',
  '/list-sessions',
  '/revoke-sessions',
  '/revoke-other-sessions',
  '/change-password',
  '/update-user',
  '/ok',
  '/error',
]);

/** OAuth and OpenID Connect redirects back from the provider: `/callback/<provider id>`. */
const CALLBACK_PATH = /^\/callback\/[A-Za-z0-9_-]+$/;

/** Whether `url` (a request target under `/api/auth/`, query allowed) names an open endpoint. */
function isOpenAuthPath(url: string): boolean {
  const query = url.indexOf('?');
  const path = (query === -1 ? url : url.slice(0, query)).slice('/api/auth'.length);
  return OPEN_AUTH_PATHS.has(path) || CALLBACK_PATH.test(path);
}

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
    // An unpaired surrogate in a JSON body, refused as on every other route (app.ts; review
    // finding, session 18: `update-user` stored `"\ud800"` as U+FFFD).
    if (request.method === 'POST' && request.headers.get('content-type')?.includes('application/json')) {
      const illFormed = illFormedStringErrorInText(await request.clone().text());
      if (illFormed) return envelopeResponse(illFormed);
    }
    try {
      const response = await presentAuthResponse(await app.ctx.auth.handler(request));
      return await withoutSessionTokens(
        presentOAuthCallbackFailure(request, response, loginUrl(app.ctx.config)),
      );
    } catch (error) {
      // Values the database refuses (a NUL byte in a name, …) are the client's: 400, as on our
      // own routes (http/error-handler.ts).
      // So is a null for a required field, which better-auth passes on unchecked
      // (`POST /update-user {"name": null}` was a 500; review finding, session 12).
      if (isClientDataError(error) || isNotNullViolation(error)) {
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
      if (!isOpenAuthPath(request.url)) throw new AppError('NOT_FOUND', 'Not found');
      // A POST carrying a session cookie changes that session's state (update-user, sign-out,
      // change-password, revoke-*): our Origin rule, as on every other cookie route (better-auth's
      // own check let a request without Origin through; review finding, session 17).
      if (request.method === 'POST' && request.headers.cookie) assertSameOrigin(request);
      checkBodySize(request);
      request.raw.headers[CLIENT_IP_HEADER] = request.ip;
      // Hijacked: the app's onSend hooks do not run, so the no-store of every API answer is set here.
      reply.raw.setHeader('cache-control', 'no-store');
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
