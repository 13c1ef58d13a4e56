import type { FastifyInstance } from 'fastify';
import type { ZodTypeProvider } from 'fastify-type-provider-zod';
import { z } from 'zod';
import { access } from '../../http/access.ts';
import { envelopeOf, ok } from '../../http/envelope.ts';
import { AppError, notFound } from '../../http/errors.ts';
import { type AdapterRow, adapterConfig, findAdapterById, isAdapterEventsToken } from '../adapters/index.ts';
import type { ProviderEventDeps } from './provider-event.ts';
import { claimProviderEventToken } from './provider-event-tokens.ts';
import { applyProviderEvents, providerEventParserOf } from './provider-events.service.ts';
import { certificateCache } from './ses.events.ts';

/** A provider's batch (SendGrid posts up to thousands of events at once). */
const BODY_LIMIT_BYTES = 5 * 1024 * 1024;
/** Certificate and SubscribeURL fetches give up after this long. */
const SNS_FETCH_TIMEOUT_MS = 10_000;

const params = z.object({ adapterId: z.string().min(1).max(200), token: z.string().min(1).max(200) });
const resultView = z.object({ received: z.number(), matched: z.number() });

/** Most bytes read of an SNS answer (a signing certificate is about 2 KB). */
const SNS_FETCH_MAX_BYTES = 64 * 1024;

/** GETs an SNS URL (already checked by the parser): no redirects, a timeout, 2xx only, at most 64 KB. */
async function fetchText(url: string): Promise<string> {
  const response = await fetch(url, { redirect: 'error', signal: AbortSignal.timeout(SNS_FETCH_TIMEOUT_MS) });
  if (!response.ok) throw new Error(`GET ${url} answered ${response.status}`);
  const chunks: Uint8Array[] = [];
  let size = 0;
  for await (const chunk of (response.body ?? []) as unknown as AsyncIterable<Uint8Array>) {
    size += chunk.byteLength;
    if (size > SNS_FETCH_MAX_BYTES)
      throw new Error(`GET ${url} answered more than ${SNS_FETCH_MAX_BYTES} bytes`);
    chunks.push(chunk);
  }
  return Buffer.concat(chunks).toString('utf8');
}

/**
 * `POST /api/provider-events/:adapterId/:token` (issue #11 "Provider events in"): where a
 * provider's webhooks post delivery events for one adapter. Public (providers have no session);
 * authenticated by the URL's token (adapters/adapter-events-url.ts) and, when the adapter has a
 * signing secret configured, by the provider's signature over the raw body.
 * Answers: 404 NOT_FOUND for an unknown adapter or an SMTP one; 401 UNAUTHORIZED for a wrong token
 * or signature; 400 VALIDATION_ERROR for a body not in the provider's format; otherwise 200
 * `{received, matched}` (events of unknown messages are acknowledged and ignored, so the provider
 * does not retry them).
 * The body is kept raw (any content type: SNS posts text/plain) for the signature checks.
 */
export async function providerEventRoutes(fastify: FastifyInstance): Promise<void> {
  const app = fastify.withTypeProvider<ZodTypeProvider>();
  app.removeAllContentTypeParsers();
  app.addContentTypeParser('*', { parseAs: 'buffer', bodyLimit: BODY_LIMIT_BYTES }, (_request, body, done) =>
    done(null, body),
  );
  const deps: ProviderEventDeps = {
    fetchText,
    snsEndpoint: app.ctx.config.PROVIDER_EVENTS_SNS_ENDPOINT,
    certificateCache: certificateCache(),
    claimToken: (adapterId, token, keepMs) =>
      claimProviderEventToken(app.ctx.database.db, adapterId, token, keepMs),
  };

  /** The adapter each request's URL names and authenticates, found before its body is read. */
  const adapters = new WeakMap<object, AdapterRow>();

  app.post(
    '/api/provider-events/:adapterId/:token',
    {
      ...access({ kind: 'public' }),
      bodyLimit: BODY_LIMIT_BYTES,
      // The URL authenticates the request: checked before the body (up to 5 MB) is read, as every
      // guard is (http/access.ts); a wrong token or adapter read the whole body first (review
      // finding, session 13).
      preParsing: async (request, _reply, payload) => {
        const { adapterId, token } = request.params as { adapterId?: unknown; token?: unknown };
        if (
          typeof adapterId !== 'string' ||
          typeof token !== 'string' ||
          adapterId.length > 200 ||
          token.length > 200
        )
          throw notFound('Adapter');
        const adapter = await findAdapterById(app.ctx.db, adapterId);
        if (!adapter) throw notFound('Adapter');
        if (!isAdapterEventsToken(app.ctx.encryptionKey, adapter.id, token)) {
          throw new AppError('UNAUTHORIZED', 'Invalid provider events token');
        }
        adapters.set(request, adapter);
        return payload;
      },
      schema: {
        tags: ['Provider events'],
        params,
        response: { 200: envelopeOf(resultView) },
      },
    },
    async (request) => {
      const adapter = adapters.get(request);
      if (!adapter) throw notFound('Adapter');
      const parse = providerEventParserOf(adapter.type);
      if (!parse)
        throw new AppError('NOT_FOUND', `Adapters of type ${adapter.type} receive no provider events`);
      const body = Buffer.isBuffer(request.body) ? request.body : Buffer.alloc(0);
      const events = await parse(
        {
          adapterId: adapter.id,
          headers: request.headers,
          body,
          config: adapterConfig(adapter, app.ctx.encryptionKey),
        },
        deps,
      );
      return ok(await applyProviderEvents(app.ctx.db, adapter, events));
    },
  );
}
