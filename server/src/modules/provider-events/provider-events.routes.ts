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
import { createSnsFetch } from './sns-fetch.ts';

/** A provider's batch (SendGrid posts up to thousands of events at once). */
const BODY_LIMIT_BYTES = 5 * 1024 * 1024;
const params = z.object({ adapterId: z.string().min(1).max(200), token: z.string().min(1).max(200) });
const resultView = z.object({ received: z.number(), matched: z.number() });

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
  // Certificates and SubscribeURLs are fetched under the outbound policy (sns-fetch.ts).
  const sns = createSnsFetch({
    policy: app.ctx.outbound,
    trustedEndpoint: app.ctx.config.PROVIDER_EVENTS_SNS_ENDPOINT,
  });
  app.addHook('onClose', () => sns.close());
  const deps: ProviderEventDeps = {
    fetchText: (url) => sns.fetchText(url),
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
