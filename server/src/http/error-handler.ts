import type { FastifyError, FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { hasZodFastifySchemaValidationErrors } from 'fastify-type-provider-zod';
import { isClientDataError, isTeamForeignKeyViolation, withoutQueryParameters } from '../db/errors.ts';
import { AppError, ERROR_STATUS, type ErrorCode, withoutChecksAfterTypeErrors } from './errors.ts';

/** Fastify's own client-error codes and what the envelope says for each. */
const FASTIFY_CLIENT_ERRORS: Record<string, { code: ErrorCode; reason: string; message: string }> = {
  FST_ERR_CTP_INVALID_MEDIA_TYPE: {
    code: 'INVALID_INPUT',
    reason: 'UNSUPPORTED_CONTENT_TYPE',
    message: 'Request bodies must be JSON with Content-Type: application/json',
  },
  // The message names the route's own limit (bodyTooLargeMessage).
  FST_ERR_CTP_BODY_TOO_LARGE: {
    code: 'INVALID_INPUT',
    reason: 'BODY_TOO_LARGE',
    message: 'Request body is too large',
  },
  FST_ERR_CTP_EMPTY_JSON_BODY: {
    code: 'INVALID_INPUT',
    reason: 'EMPTY_JSON_BODY',
    message: 'Body cannot be empty when Content-Type is application/json',
  },
  FST_ERR_CTP_INVALID_JSON_BODY: {
    code: 'INVALID_INPUT',
    reason: 'MALFORMED_JSON',
    message: 'Malformed JSON body',
  },
  // The router's errors, raised before routing (see frameworkErrorHandler).
  FST_ERR_BAD_URL: {
    code: 'INVALID_INPUT',
    reason: 'MALFORMED_URL',
    message: 'The request path is not a valid URL encoding',
  },
  FST_ERR_MAX_PARAM_LENGTH: {
    code: 'INVALID_INPUT',
    reason: 'PATH_PARAMETER_TOO_LONG',
    message: 'A path parameter is longer than 100 characters',
  },
  FST_ERR_CTP_INVALID_CONTENT_LENGTH: {
    code: 'INVALID_INPUT',
    reason: 'INVALID_CONTENT_LENGTH',
    message: 'Content-Length does not match the body',
  },
};

/** `bytes` as "16 MB", "64 KB" or "1000 bytes" (binary units, as the limits are written). */
function formatBytes(bytes: number): string {
  if (bytes >= 1024 * 1024 && bytes % (1024 * 1024) === 0) return `${bytes / (1024 * 1024)} MB`;
  if (bytes >= 1024 && bytes % 1024 === 0) return `${bytes / 1024} KB`;
  return `${bytes} bytes`;
}

/**
 * The body-too-large message with the limit of the route the request was for (its `bodyLimit`
 * option, else the server's: send 16 MB, batch 32 MB, provider events 5 MB, others 10 MB), or
 * without a number when the route is unknown.
 */
function bodyTooLargeMessage(request: FastifyRequest): string {
  const limit = request.routeOptions?.bodyLimit;
  return typeof limit === 'number' && limit > 0
    ? `Request body exceeds the ${formatBytes(limit)} limit`
    : 'Request body is too large';
}

function sendError(reply: FastifyReply, error: AppError): FastifyReply {
  // Every 429 that says when to come back says it in the header too (RFC 9110 §10.2.3).
  const retryAfter = error.details.retryAfterSeconds;
  if (error.code === 'RATE_LIMITED' && typeof retryAfter === 'number' && !reply.hasHeader('retry-after')) {
    reply.header('Retry-After', Math.max(1, Math.ceil(retryAfter)));
  }
  return reply
    .code(error.statusCode)
    .type('application/json; charset=utf-8')
    .send({ success: false, error: { code: error.code, message: error.message, details: error.details } });
}

/**
 * True when the request got no database connection: node-postgres's pool gave up after
 * `connectionTimeoutMillis` (db/client.ts POOL_CONNECTION_TIMEOUT_MS: every connection busy, or
 * the server not answering), or the server refused or cut the connection. The server's state, not
 * the request's fault, and not a bug: 503 SERVICE_UNAVAILABLE, as the spec has it for a dependency
 * that is down (review finding, session 18: a 500 INTERNAL_ERROR logged as unhandled).
 */
function isDatabaseUnavailable(error: unknown): boolean {
  for (let e: unknown = error; e instanceof Error; e = e.cause) {
    if (DATABASE_UNAVAILABLE_MESSAGES.has(e.message)) return true;
    const code = (e as { code?: unknown }).code;
    if (typeof code === 'string' && DATABASE_UNREACHABLE_CODES.has(code) && isSocketError(e)) return true;
  }
  return false;
}

/**
 * node-postgres's messages when no connection could be had: the pool's wait ended (pg-pool), a new
 * connection did not come up in time or was cut (pg Client).
 */
const DATABASE_UNAVAILABLE_MESSAGES = new Set([
  'timeout exceeded when trying to connect',
  'Connection terminated due to connection timeout',
  'Connection terminated unexpectedly',
]);
/** Node's system error codes of a connection refused, reset or unreachable. */
const DATABASE_UNREACHABLE_CODES = new Set(['ECONNREFUSED', 'ECONNRESET', 'ETIMEDOUT', 'EHOSTUNREACH']);
/** A system error of a socket (Node sets `syscall`), not a PostgreSQL error that carries a code. */
const isSocketError = (error: Error) => typeof (error as { syscall?: unknown }).syscall === 'string';

/** Converts anything thrown in a route into the spec's error envelope. Never leaks stacks or SQL. */
export function toAppError(error: unknown, request: FastifyRequest): AppError {
  if (error instanceof AppError) return error;
  if (hasZodFastifySchemaValidationErrors(error)) {
    const issues = error.validation.map((v) => {
      const where = v.instancePath.replace(/^\//, '').replaceAll('/', '.');
      const context = error.validationContext ?? 'body';
      return {
        path: where ? `${context}.${where}` : context,
        message: v.message ?? 'invalid',
        typeError: v.keyword === 'invalid_type',
      };
    });
    return new AppError('VALIDATION_ERROR', 'Request validation failed', {
      issues: withoutChecksAfterTypeErrors(issues, (issue) => issue.typeError).map(({ path, message }) => ({
        path,
        message,
      })),
    });
  }
  const fastifyError = error as Partial<FastifyError>;
  const known = fastifyError.code ? FASTIFY_CLIENT_ERRORS[fastifyError.code] : undefined;
  if (known) {
    const message =
      fastifyError.code === 'FST_ERR_CTP_BODY_TOO_LARGE' ? bodyTooLargeMessage(request) : known.message;
    return new AppError(known.code, message, { reason: known.reason });
  }
  if (error instanceof SyntaxError && (fastifyError.statusCode ?? 0) === 400) {
    return new AppError('INVALID_INPUT', 'Malformed JSON body', { reason: 'MALFORMED_JSON' });
  }
  if (isClientDataError(error)) {
    return new AppError('INVALID_INPUT', 'The request contains text or data the database cannot store', {
      reason: 'UNSUPPORTED_DATA',
    });
  }
  if (isTeamForeignKeyViolation(error)) {
    // The caller's team was deleted (`postwright delete-user` deletes a user's own teams) while this
    // process still held its key or session verified: its key and its members' sessions went with
    // it, so 401, as their next request gets once the caches forget them (was 500 on every write
    // with a team foreign key, review finding, session 19). The key is forgotten here at once.
    const principal = request.principal;
    if (principal?.kind === 'apiKey') request.server.ctx?.caches.apiKeys.evict(principal.apiKeyId);
    return new AppError('INVALID_TOKEN', 'The team of these credentials no longer exists');
  }
  if (isDatabaseUnavailable(error)) {
    request.log.warn({ reqId: request.id }, 'no database connection within the pool wait');
    return new AppError('SERVICE_UNAVAILABLE', 'The database is busy or unreachable: try again shortly', {
      reason: 'DATABASE_UNAVAILABLE',
    });
  }
  const status = fastifyError.statusCode ?? 500;
  if (status >= 400 && status < 500) {
    const code: ErrorCode = status === 404 ? 'NOT_FOUND' : status === 429 ? 'RATE_LIMITED' : 'INVALID_INPUT';
    return new AppError(code, fastifyError.message ?? 'Bad request');
  }
  request.log.error({ err: withoutQueryParameters(error), reqId: request.id }, 'unhandled error');
  return new AppError('INTERNAL_ERROR', 'Internal server error', { requestId: request.id });
}

/**
 * Answers a request no route matched and resolves true, or resolves false to let it be the JSON
 * 404 (the dashboard's files and client routes, http/dashboard.ts). A boolean, not the reply: a
 * reply is thenable, and awaiting it waits for the response instead of returning it.
 */
export type NotFoundFallback = (request: FastifyRequest, reply: FastifyReply) => Promise<boolean>;

/**
 * Installs the error and not-found handlers that render the envelope for every failure. A request
 * no route matched goes to `options.fallback` first when given (the dashboard), else is 404 NOT_FOUND.
 */
export function installErrorHandling(
  app: FastifyInstance,
  options: { fallback?: NotFoundFallback } = {},
): void {
  app.setErrorHandler((error, request, reply) => sendError(reply, toAppError(error, request)));
  app.setNotFoundHandler(async (request, reply) => {
    if (await options.fallback?.(request, reply)) return reply;
    return sendError(
      reply,
      new AppError('NOT_FOUND', `Route ${request.method} ${request.url.split('?')[0]} not found`),
    );
  });
}

/**
 * Fastify's `frameworkErrors` option: errors its router raises before any route, hook or error
 * handler runs (FST_ERR_BAD_URL for a path find-my-way cannot percent-decode, such as
 * `/api/templates/%E0%A4%A`; FST_ERR_MAX_PARAM_LENGTH for a parameter over the router's
 * `maxParamLength`, 100 characters). Without it Fastify answers with its own body; with it, the
 * spec's envelope: 400 INVALID_INPUT with `details.reason` MALFORMED_URL / PATH_PARAMETER_TOO_LONG
 * (issue #10). Applies to every path, authenticated or not, since no route was matched.
 */
export function frameworkErrorHandler(
  error: FastifyError,
  request: FastifyRequest,
  reply: FastifyReply,
): void {
  sendError(reply, toAppError(error, request));
}

/** The envelope of a 400 INVALID_INPUT answered outside Fastify, as JSON text. */
function invalidInputJson(message: string, reason: string): string {
  return JSON.stringify({ success: false, error: { code: 'INVALID_INPUT', message, details: { reason } } });
}

/**
 * A whole HTTP/1.1 response, 400 INVALID_INPUT in the envelope with `Connection: close`, for
 * writing straight to a socket that Node has taken away from the HTTP server (a parse error, a
 * CONNECT). `message` is ASCII: it is the status line's reason phrase too.
 */
function rawInvalidInputResponse(message: string, reason: string): string {
  const body = invalidInputJson(message, reason);
  return `HTTP/1.1 ${ERROR_STATUS.INVALID_INPUT} ${message}\r\nConnection: close\r\nContent-Length: ${Buffer.byteLength(body)}\r\nContent-Type: application/json; charset=utf-8\r\n\r\n${body}`;
}

/**
 * Answers requests Node's HTTP parser rejects before Fastify sees them (bad header bytes, header
 * overflow, timeouts) with the spec's envelope instead of Fastify's default body.
 */
export function clientErrorHandler(error: NodeJS.ErrnoException, socket: import('node:net').Socket): void {
  if (error.code === 'ECONNRESET' || socket.destroyed) return;
  const message =
    error.code === 'ERR_HTTP_REQUEST_TIMEOUT'
      ? 'Request timed out'
      : error.code === 'HPE_HEADER_OVERFLOW'
        ? 'Request headers too large'
        : 'Malformed HTTP request';
  if (socket.writable) socket.write(rawInvalidInputResponse(message, error.code ?? 'CLIENT_ERROR'));
  socket.destroy(error);
}

/**
 * The HTTP server's `checkExpectation` listener: a request whose `Expect` header is anything but
 * `100-continue` (RFC 9110 §10.1.1) gets 400 INVALID_INPUT with `details.reason`
 * EXPECTATION_FAILED in the envelope, and the connection is closed (its body is not read). Node's
 * default was a bare 417 with an empty body (review finding, session 18); 417 has no code in the
 * spec's table, and the RFC lets a server answer an expectation it does not meet with a 4xx.
 * Nothing of the app runs for such a request: Node emits this instead of `request`.
 */
export function unsupportedExpectationHandler(
  _request: import('node:http').IncomingMessage,
  response: import('node:http').ServerResponse,
): void {
  const body = invalidInputJson(
    'Unsupported Expect header: only 100-continue is understood',
    'EXPECTATION_FAILED',
  );
  response
    .writeHead(ERROR_STATUS.INVALID_INPUT, {
      'content-type': 'application/json; charset=utf-8',
      'content-length': Buffer.byteLength(body),
      'cache-control': 'no-store',
      connection: 'close',
    })
    .end(body);
}

/**
 * The HTTP server's `connect` listener: a `CONNECT` request (a proxy tunnel, which this server is
 * not) gets 400 INVALID_INPUT with `details.reason` UNSUPPORTED_METHOD in the envelope, and the
 * connection is closed. Without a listener Node closed the socket without a response (review
 * finding, session 18). Node has taken the socket from the HTTP server, error listener included:
 * one is added so that a client resetting it cannot crash the process.
 */
export function connectMethodHandler(
  _request: import('node:http').IncomingMessage,
  socket: import('node:stream').Duplex,
): void {
  socket.on('error', () => socket.destroy());
  socket.end(rawInvalidInputResponse('CONNECT is not supported', 'UNSUPPORTED_METHOD'));
}
