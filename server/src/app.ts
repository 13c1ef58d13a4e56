import swagger from '@fastify/swagger';
import Fastify, { type FastifyInstance } from 'fastify';
import {
  jsonSchemaTransform,
  serializerCompiler,
  validatorCompiler,
  type ZodTypeProvider,
} from 'fastify-type-provider-zod';
import type { DestinationStream } from 'pino';
import type { Config } from './config.ts';
import { type DatabaseHandle, isDatabaseReachable } from './db/client.ts';
import { access, type RouteAccess, registerAccessGuards } from './http/access.ts';
import { apiDocsRoutes } from './http/api-docs.ts';
import { clientErrorHandler, frameworkErrorHandler, installErrorHandling } from './http/error-handler.ts';
import { AppError } from './http/errors.ts';
import { jsonDepth, MAX_JSON_DEPTH } from './http/json-depth.ts';
import { redactUrl } from './http/log-redaction.ts';
import { fastifyTrustProxy } from './http/trust-proxy.ts';
import type { JobQueue } from './jobs/queue.ts';
import { adapterRoutes } from './modules/adapters/index.ts';
import {
  type ApiKeyCache,
  apiKeyRoutes,
  createApiKeyCache,
  createRateLimiter,
  type RateLimiter,
  requireApiKey,
} from './modules/api-keys/index.ts';
import { type Auth, authRoutes, createAuth, requireSession } from './modules/auth/index.ts';
import { logRoutes, sendRoutes } from './modules/emails/index.ts';
import { joinInvitedTeams, teamRoutes } from './modules/teams/index.ts';
import { templateRoutes } from './modules/templates/index.ts';
import { uploadRoutes } from './modules/uploads/index.ts';

/** What the HTTP app needs from the process; tests build it with real PostgreSQL. */
export interface AppDeps {
  config: Config;
  database: DatabaseHandle;
  queue: JobQueue;
  /** 32-byte key for adapter configs at rest (AES-256-GCM). */
  encryptionKey: Buffer;
  /** Where the logger writes; stdout when absent (tests read the logs through it). */
  logStream?: DestinationStream;
}

/** Services the app builds once from its deps and shares with every route. */
export interface AppContext extends AppDeps {
  auth: Auth;
  rateLimiter: RateLimiter;
  /** Verified API keys of this process, for at most API_KEY_CACHE_TTL_MS (issue #9). */
  apiKeyCache: ApiKeyCache;
  /** Every route with its declared access rule, filled as routes register (the isolation matrix reads it). */
  routes: RouteAccess[];
}

declare module 'fastify' {
  interface FastifyInstance {
    ctx: AppContext;
  }
}

/** 10 MB (issue #2): larger bodies get 400 INVALID_INPUT. */
export const BODY_LIMIT_BYTES = 10 * 1024 * 1024;

/**
 * Builds the Fastify app: envelope and error handling, OpenAPI at `/docs` (JSON at `/docs/json`),
 * health endpoints, better-auth and every module's routes. Does not listen and starts no worker.
 */
export async function buildApp(deps: AppDeps): Promise<FastifyInstance> {
  const app = Fastify({
    logger: {
      level: deps.config.LOG_LEVEL,
      serializers: {
        // Secrets that travel in URLs (setup token, invitation ids) stay out of the logs.
        req: (request) => ({
          method: request.method,
          url: redactUrl(request.url),
          host: request.host,
          remoteAddress: request.ip,
        }),
      },
      ...(deps.logStream ? { stream: deps.logStream } : {}),
    },
    bodyLimit: BODY_LIMIT_BYTES,
    trustProxy: fastifyTrustProxy(deps.config.TRUST_PROXY),
    routerOptions: { ignoreTrailingSlash: true },
    clientErrorHandler,
    frameworkErrors: frameworkErrorHandler,
  }).withTypeProvider<ZodTypeProvider>();

  // The composition root plugs the modules' guards into http (http imports no module).
  registerAccessGuards({ session: requireSession, apiKey: (scopes) => requireApiKey(...scopes) });
  app.setValidatorCompiler(validatorCompiler);
  app.setSerializerCompiler(serializerCompiler);
  installErrorHandling(app);
  // Fastify's JSON parser (prototype-poisoning safe), except that an empty body is "no body":
  // clients often send Content-Type: application/json on body-less POSTs such as regenerate.
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
    parseJson(request, body as string, done);
  });

  const ctx: AppContext = {
    ...deps,
    auth: createAuth({
      ...deps,
      log: app.log,
      joinInvitedTeams: (user) => joinInvitedTeams(deps.database.db, user, new Date()),
    }),
    rateLimiter: createRateLimiter(deps.config, app.log.child({ module: 'rate-limit' })),
    apiKeyCache: createApiKeyCache(),
    routes: [],
  };
  app.addHook('onRoute', (route) => {
    for (const method of [route.method].flat()) {
      ctx.routes.push({ method, url: route.url, access: route.config?.access });
    }
  });
  app.decorate('ctx', ctx);
  app.decorateRequest('principal', null);
  app.addHook('onClose', async () => ctx.rateLimiter.close());

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
          session: { type: 'apiKey', in: 'cookie', name: 'postwright.session_token' },
        },
      },
    },
    transform: jsonSchemaTransform,
  });
  // The reference UI's plugin is loaded on the first /docs request (idle memory, issue #9).
  await apiDocsRoutes(app);

  app.get('/healthz', { ...access({ kind: 'public' }), schema: { hide: true } }, async () => ({
    success: true,
    data: { status: 'ok' },
  }));
  app.get('/readyz', { ...access({ kind: 'public' }), schema: { hide: true } }, async () => {
    if (!(await isDatabaseReachable(deps.database.db))) {
      throw new AppError('SERVICE_UNAVAILABLE', 'Database unreachable');
    }
    return { success: true, data: { status: 'ready' } };
  });

  await app.register(authRoutes);
  await app.register(apiKeyRoutes);
  await app.register(adapterRoutes);
  await app.register(templateRoutes);
  await app.register(sendRoutes);
  await app.register(logRoutes);
  await app.register(teamRoutes);
  await app.register(uploadRoutes);
  return app;
}
