/**
 * The API reference under /docs (Scalar UI, OpenAPI document at /docs/json and /docs/yaml),
 * loaded on the first request instead of at start.
 *
 * Why: @scalar/fastify-api-reference embeds its 4 MB browser bundle as a string literal, so merely
 * importing it keeps ~17 MB in the V8 heap (the module source plus the string) of every process,
 * including an idle one nobody browses the docs of (issue #9: idle memory). Routes cannot be added
 * to a Fastify instance once it listens, so this registers `/docs` and `/docs/*` itself and, on
 * the first hit, builds a private Fastify instance with the real plugin (public options only: its
 * document comes from `app.swagger()`) and answers each request through `inject`.
 */
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import Fastify from 'fastify';
import { access } from './access.ts';
import { AppError } from './errors.ts';

const PREFIX = '/docs';

type Docs = Pick<FastifyInstance, 'inject'>;

/** Builds the instance that serves the reference; `document` returns the OpenAPI document. */
async function buildDocs(document: () => unknown): Promise<Docs> {
  const { default: scalar } = await import('@scalar/fastify-api-reference');
  const docs = Fastify({ logger: false });
  await docs.register(scalar, {
    routePrefix: PREFIX,
    openApiDocumentEndpoints: { json: '/json', yaml: '/yaml' },
    configuration: { content: document as () => Record<string, unknown> },
  });
  await docs.ready();
  return docs;
}

/**
 * Registers GET /docs and /docs/* (public, hidden from the document). The first request
 * loads the reference (a failure is retried on the next request); later ones reuse it. Answers
 * what the plugin answers (status, headers, body), except a 404 in the spec's envelope (NOT_FOUND).
 */
export async function apiDocsRoutes(app: FastifyInstance): Promise<void> {
  let loading: Promise<Docs> | undefined;
  const docs = () => {
    loading ??= buildDocs(() => app.swagger()).catch((error: unknown) => {
      loading = undefined;
      throw error;
    });
    return loading;
  };
  const handler = async (request: FastifyRequest, reply: FastifyReply) => {
    const answer = await (await docs()).inject({ method: 'GET', url: request.url });
    // The private instance's own 404 is not in the spec's envelope: answer as any unknown route.
    if (answer.statusCode === 404) {
      throw new AppError('NOT_FOUND', `Route ${request.method} ${request.url.split('?')[0]} not found`);
    }
    for (const [name, value] of Object.entries(answer.headers)) {
      if (value === undefined || /^(content-length|connection|date|transfer-encoding)$/i.test(name)) continue;
      reply.header(name, value);
    }
    // Same origin as the session cookie: never framed, no sniffing (review finding, session 14).
    reply.header('x-frame-options', 'DENY');
    reply.header('content-security-policy', "frame-ancestors 'none'");
    reply.header('x-content-type-options', 'nosniff');
    reply.header('referrer-policy', 'same-origin');
    return reply.code(answer.statusCode).send(answer.rawPayload);
  };
  const options = { ...access({ kind: 'public' }), schema: { hide: true } };
  // `/docs/*` also matches `/docs/` itself.
  for (const url of [PREFIX, `${PREFIX}/*`]) app.get(url, options, handler);
}
