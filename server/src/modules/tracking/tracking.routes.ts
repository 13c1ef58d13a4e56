import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import type { ZodTypeProvider } from 'fastify-type-provider-zod';
import { z } from 'zod';
import { access } from '../../http/access.ts';
import { binaryResponse, redirectResponse } from '../../http/access-docs.ts';
import { notFound } from '../../http/errors.ts';
import { errorForLog } from '../../http/log-redaction.ts';
import { type TrackingClaim, trackingKey, verifyTrackingToken } from '../../tracking/tokens.ts';
import { isMachineHit } from './prefetch.ts';
import { TrackingRecorder } from './tracking.service.ts';

/** A 1×1 transparent GIF (GIF89a, 43 bytes). */
export const PIXEL_GIF = Buffer.from('R0lGODlhAQABAIAAAAAAAP///yH5BAEAAAAALAAAAAABAAEAAAIBRAA7', 'base64');

/**
 * How long a hit waits for its recording before answering anyway (ms): a slow or failing database
 * never delays the pixel or the redirect by more than this; the recording carries on behind it.
 */
export const RECORD_WAIT_MS = 1_000;

const tags = ['Tracking'];
// A wildcard, not `:token`: the router caps a parametric segment at 100 characters, and a click
// token carries its URL. A token never holds "/", so one with a slash is simply invalid.
const tokenParams = z.object({ '*': z.string() });

/**
 * The public tracking endpoints of issue #11 (no authentication: mail clients call them):
 * - `GET /t/o/:token`: 200, a 1×1 transparent GIF, never cached; records an open;
 * - `GET /t/c/:token`: 302 to the URL the token carries (one that was a link of the email);
 *   records a click (and the open it implies).
 * A token whose signature does not verify is 404 NOT_FOUND (never a redirect). A valid token is
 * always answered the same way whether or not its email still exists, and even when recording
 * fails (logged), so neither leaks more than the token proves. HEAD requests and machine
 * pre-fetchers (prefetch.ts) get the same answer and are not recorded.
 */
export async function trackingRoutes(fastify: FastifyInstance): Promise<void> {
  const app = fastify.withTypeProvider<ZodTypeProvider>();
  const key = trackingKey(app.ctx.encryptionKey);
  const recorder = new TrackingRecorder(app.ctx.database.db);

  /** Records `claim` for a counted hit, waiting at most RECORD_WAIT_MS; never throws. */
  async function record(request: FastifyRequest, claim: TrackingClaim): Promise<void> {
    if (isMachineHit(request.method, request.headers)) return;
    const recording = recorder.record(claim).catch((error: unknown) => {
      request.log.warn({ err: errorForLog(error), emailId: claim.emailId }, 'tracking hit not recorded');
    });
    let timer: NodeJS.Timeout | undefined;
    await Promise.race([recording, new Promise((resolve) => (timer = setTimeout(resolve, RECORD_WAIT_MS)))]);
    clearTimeout(timer);
  }

  function noStore(reply: FastifyReply): FastifyReply {
    return reply
      .header('cache-control', 'no-store, no-cache, must-revalidate, private, max-age=0')
      .header('referrer-policy', 'no-referrer');
  }

  app.get(
    '/t/o/*',
    {
      ...access({ kind: 'public' }),
      schema: {
        tags,
        description:
          'Open-tracking pixel of a tracked email: a 1×1 transparent GIF. 404 for an invalid token.',
        params: tokenParams,
        wildcardName: 'token',
        responseDocs: { 200: binaryResponse('A 1×1 transparent GIF, never cached', ['image/gif']) },
      },
    },
    async (request, reply) => {
      const claim = verifyTrackingToken(key, request.params['*'], 'open');
      if (!claim) throw notFound('Tracking link');
      await record(request, claim);
      return noStore(reply).type('image/gif').header('content-length', PIXEL_GIF.length).send(PIXEL_GIF);
    },
  );

  app.get(
    '/t/c/*',
    {
      ...access({ kind: 'public' }),
      schema: {
        tags,
        description:
          'Click-tracking link of a tracked email: 302 to the link it stands for. 404 for an invalid token.',
        params: tokenParams,
        wildcardName: 'token',
        responseDocs: { 302: redirectResponse('To the link', 'The URL of the link the token stands for') },
      },
    },
    async (request, reply) => {
      const claim = verifyTrackingToken(key, request.params['*'], 'click');
      if (claim?.kind !== 'click') throw notFound('Tracking link');
      await record(request, claim);
      return noStore(reply).redirect(claim.url, 302);
    },
  );
}
