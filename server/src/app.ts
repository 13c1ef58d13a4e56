import swagger from '@fastify/swagger';
import Fastify, { type FastifyInstance, type FastifyServerOptions } from 'fastify';
import {
  jsonSchemaTransform,
  serializerCompiler,
  validatorCompiler,
  type ZodTypeProvider,
} from 'fastify-type-provider-zod';
import { z } from 'zod';
import type { Context } from './context.ts';
import { isDatabaseReachable } from './db/client.ts';
import { access, type RouteAccess, registerAccessGuards } from './http/access.ts';
import {
  allowNullInNullableEnums,
  markOptionalBodies,
  reuseRequestBody,
  withAccessDocs,
} from './http/access-docs.ts';
import { apiDocsRoutes } from './http/api-docs.ts';
import { dashboardFallback } from './http/dashboard.ts';
import { envelopeOf } from './http/envelope.ts';
import {
  clientErrorHandler,
  connectMethodHandler,
  frameworkErrorHandler,
  installErrorHandling,
  unsupportedExpectationHandler,
} from './http/error-handler.ts';
import { AppError } from './http/errors.ts';
import { forbiddenKeyError, illFormedStringError } from './http/json-body-checks.ts';
import { jsonDepth, MAX_JSON_DEPTH } from './http/json-depth.ts';
import { sessionCookieName } from './http/session-cookie.ts';
import { fastifyTrustProxy } from './http/trust-proxy.ts';
import { wireStatusListeners } from './job-handlers.ts';
import { adapterRoutes } from './modules/adapters/index.ts';
import {
  apiKeyRoutes,
  createRateLimiter,
  type RateLimiter,
  requireApiKey,
} from './modules/api-keys/index.ts';
import {
  AUTH_LIBRARY_PATHS,
  type Auth,
  authRoutes,
  createAuth,
  requireSession,
} from './modules/auth/index.ts';
import { logRoutes, sendRoutes } from './modules/emails/index.ts';
import { providerEventRoutes } from './modules/provider-events/index.ts';
import { suppressionRoutes } from './modules/suppressions/index.ts';
import { joinInvitedTeams, teamRoutes } from './modules/teams/index.ts';
import { templateRoutes } from './modules/templates/index.ts';
import { trackingRoutes } from './modules/tracking/index.ts';
import { uploadRoutes } from './modules/uploads/index.ts';
import { webhookRoutes } from './modules/webhooks/index.ts';

/**
 * What every route reaches as `app.ctx`: the process's {@link Context} (shared with the worker)
 * plus the services only the HTTP app has, built once per app.
 */
export interface AppContext extends Context {
  auth: Auth;
  rateLimiter: RateLimiter;
  /** Every route with its declared access rule, filled as routes register (the isolation matrix reads it). */
  routes: RouteAccess[];
}

declare module 'fastify' {
  interface FastifyInstance {
    ctx: AppContext;
  }
}

/**
 * The compilers Fastify builds for a route schema: zod's, as set below with setValidatorCompiler and
 * setSerializerCompiler. Fastify's types describe only factories of Ajv-shaped compilers, hence the cast.
 */
const zodCompilersFactory = {
  buildValidator: () => validatorCompiler,
  buildSerializer: () => serializerCompiler,
} as unknown as NonNullable<FastifyServerOptions['schemaController']>['compilersFactory'];

/** 10 MB (issue #2): larger bodies get 400 INVALID_INPUT. */
export const BODY_LIMIT_BYTES = 10 * 1024 * 1024;

/** Longest time a request may take to arrive, headers and body (ms; review finding, session 15). */
export const REQUEST_TIMEOUT_MS = 120_000;

/**
 * Builds the Fastify app over `context` (see createContext): envelope and error handling, OpenAPI
 * at `/docs` (JSON at `/docs/json`), health endpoints, better-auth, every module's routes and the
 * dashboard at `/` (http/dashboard.ts). Logs
 * through the context's logger. Does not listen and starts no worker; closing the app leaves the
 * context open (the worker may still use it).
 */
export async function buildApp(context: Context): Promise<FastifyInstance> {
  const app = Fastify({
    loggerInstance: context.logger,
    bodyLimit: BODY_LIMIT_BYTES,
    // A request must arrive whole within this time (Fastify's default 0 also turned off Node's own
    // 300 s): a client trickling a body held its connection, and a stopping server, indefinitely.
    requestTimeout: REQUEST_TIMEOUT_MS,
    trustProxy: fastifyTrustProxy(context.config.TRUST_PROXY),
    routerOptions: { ignoreTrailingSlash: true },
    clientErrorHandler,
    frameworkErrors: frameworkErrorHandler,
    // Every route validates and serialises with zod (below). Without compiler factories of its own,
    // Fastify requires its default ones when the instance is made, loading Ajv, fast-uri,
    // ajv-formats and fast-json-stringify that no route uses (≈ 0.7 MB of source; issue #9).
    schemaController: { compilersFactory: zodCompilersFactory },
  }).withTypeProvider<ZodTypeProvider>();

  // The composition root plugs the modules' guards into http (http imports no module).
  registerAccessGuards({ session: requireSession, apiKey: (scopes) => requireApiKey(...scopes) });
  // Status changes made by this process (accepted sends, …) fan out to webhooks (issue #11).
  wireStatusListeners();
  app.setValidatorCompiler(validatorCompiler);
  app.setSerializerCompiler(serializerCompiler);
  // Paths no route matches fall back to the dashboard's files and client routes (http/dashboard.ts).
  installErrorHandling(app, { fallback: dashboardFallback() });
  // Node answers an Expect other than 100-continue with a bare 417, and closes a CONNECT without
  // a word, unless told otherwise: both in the envelope (review finding, session 18).
  app.server.on('checkExpectation', unsupportedExpectationHandler);
  app.server.on('connect', connectMethodHandler);
  // Fastify's JSON parser (prototype-poisoning safe), except that an empty body is "no body":
  // clients often send Content-Type: application/json on body-less POSTs such as regenerate.
  // Keys it refuses and strings PostgreSQL would not store as sent get their own errors.
  const parseJson = app.getDefaultJsonParser('error', 'error');
  app.removeContentTypeParser(['application/json', 'text/plain']);
  app.addContentTypeParser('application/json', { parseAs: 'string' }, (request, body, done) => {
    if (body === '') return done(null, undefined);
    if (jsonDepth(body as string) > MAX_JSON_DEPTH) {
      return done(
        new AppError('INVALID_INPUT', `JSON nested deeper than ${MAX_JSON_DEPTH} levels`, {
          reason: 'TOO_DEEPLY_NESTED',
        }),
      );
    }
    parseJson(request, body as string, (error, value) => {
      if (error) return done(forbiddenKeyError(body as string) ?? error);
      const illFormed = request.routeOptions.config?.stringsCheckedPerItem
        ? undefined
        : illFormedStringError(body as string, value);
      if (illFormed) return done(illFormed);
      done(null, value);
    });
  });

  const ctx: AppContext = {
    ...context,
    auth: createAuth({
      ...context,
      log: app.log,
      joinInvitedTeams: (user) => joinInvitedTeams(context.db, user, context.clock.now()),
    }),
    rateLimiter: createRateLimiter(context.config, app.log.child({ module: 'rate-limit' })),
    routes: [],
  };
  app.addHook('onRoute', (route) => {
    for (const method of [route.method].flat()) {
      ctx.routes.push({ method, url: route.url, access: route.config?.access });
    }
  });
  app.decorate('ctx', ctx);
  app.decorateRequest('principal', null);
  app.decorateRequest('sessionUser', null);
  app.addHook('onClose', async () => ctx.rateLimiter.close());
  // API answers carry team data and secrets (an adapter's decrypted config on its get-one, …): no
  // browser or proxy may keep them (review finding, session 17: an adapter's SMTP password stayed
  // in the browser's HTTP cache after sign-out). A route that set its own caching keeps it.
  app.addHook('onSend', async (request, reply) => {
    if (request.url.startsWith('/api/') && !reply.hasHeader('cache-control'))
      reply.header('cache-control', 'no-store');
  });

  await app.register(swagger, {
    openapi: {
      info: {
        title: 'Postwright API',
        version: '1.0.0',
        description: 'Email templates, rendering and delivery. Public API under /api/v1 (X-API-Key).',
      },
      components: {
        securitySchemes: {
          apiKey: { type: 'apiKey', in: 'header', name: 'X-API-Key' },
          session: {
            type: 'apiKey',
            in: 'cookie',
            name: sessionCookieName(context.config.BASE_URL),
            description:
              'The session cookie POST /api/auth/sign-in/email sets (`__Secure-` prefixed when BASE_URL is https)',
          },
        },
      },
    },
    transform: withAccessDocs(jsonSchemaTransform),
    transformObject: (document) => {
      const openapi = markOptionalBodies(
        'openapiObject' in document ? document.openapiObject : document.swaggerObject,
      );
      // Batch items are validated one by one with the send body's schema (emails.routes.ts).
      reuseRequestBody(
        openapi,
        { path: '/api/v1/send', method: 'post' },
        { path: '/api/v1/send/batch', method: 'post', at: ['properties', 'emails', 'items'] },
      );
      // The auth library's own endpoints, outside the route table.
      return allowNullInNullableEnums({
        ...openapi,
        paths: { ...AUTH_LIBRARY_PATHS, ...openapi.paths },
      }) as unknown as typeof openapi;
    },
  });
  // The reference UI's plugin is loaded on the first /docs request (idle memory, issue #9).
  await apiDocsRoutes(app);

  // Probes for load balancers and orchestrators: the process answers; and it reaches its database.
  app.get(
    '/healthz',
    {
      ...access({ kind: 'public' }),
      schema: {
        tags: ['Health'],
        summary: 'Liveness: the process answers',
        response: { 200: envelopeOf(z.object({ status: z.literal('ok') })) },
      },
    },
    async () => ({ success: true as const, data: { status: 'ok' as const } }),
  );
  app.get(
    '/readyz',
    {
      ...access({ kind: 'public' }),
      schema: {
        tags: ['Health'],
        summary: 'Readiness: the database answers (503 SERVICE_UNAVAILABLE when it does not within 2 s)',
        response: { 200: envelopeOf(z.object({ status: z.literal('ready') })) },
      },
    },
    async () => {
      if (!(await isDatabaseReachable(context.db))) {
        throw new AppError('SERVICE_UNAVAILABLE', 'Database unreachable');
      }
      return { success: true as const, data: { status: 'ready' as const } };
    },
  );

  await app.register(authRoutes);
  await app.register(apiKeyRoutes);
  await app.register(adapterRoutes);
  await app.register(templateRoutes);
  await app.register(sendRoutes);
  await app.register(logRoutes);
  await app.register(providerEventRoutes);
  await app.register(suppressionRoutes);
  await app.register(teamRoutes);
  await app.register(uploadRoutes);
  await app.register(webhookRoutes);
  await app.register(trackingRoutes);
  return app;
}
