import { generateKeyPairSync, sign } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import type { ProviderEventDeps } from './provider-event.ts';
import { parseSendGridEvents, SENDGRID_TIMESTAMP_WINDOW_MS } from './sendgrid.events.ts';
import { certificateCache } from './ses.events.ts';

const { publicKey, privateKey } = generateKeyPairSync('ec', { namedCurve: 'prime256v1' });
const webhookPublicKey = publicKey.export({ format: 'der', type: 'spki' }).toString('base64');
const deps: ProviderEventDeps = {
  fetchText: () => Promise.reject(new Error('no fetch expected')),
  certificateCache: certificateCache(),
  claimToken: () => Promise.resolve(true),
};

/** Parses `events` as a SendGrid batch signed at `at` (ms); unsigned when `signed` is false. */
function parse(events: unknown, options: { at?: number; signed?: boolean } = {}) {
  const body = JSON.stringify(events);
  const timestamp = String(Math.floor((options.at ?? Date.now()) / 1000));
  const signature = sign('sha256', Buffer.from(timestamp + body), { key: privateKey, dsaEncoding: 'der' });
  const signed = options.signed ?? true;
  return parseSendGridEvents(
    {
      adapterId: 'adp_1',
      headers: {
        'x-twilio-email-event-webhook-signature': signature.toString('base64'),
        'x-twilio-email-event-webhook-timestamp': timestamp,
      },
      body: Buffer.from(body),
      config: signed ? { webhookPublicKey } : {},
    },
    deps,
  );
}

const bounce = { email: 'victim@example.com', event: 'bounce', type: 'bounce', sg_message_id: 'sg-1.f1' };

describe('SendGrid signatures: the timestamp', () => {
  it('accepts a fresh signed batch', async () => {
    expect(await parse([bounce])).toMatchObject([{ kind: 'bounced', recipients: ['victim@example.com'] }]);
  });

  it.each([
    ['old', -(SENDGRID_TIMESTAMP_WINDOW_MS + 60_000)],
    ['in the future', SENDGRID_TIMESTAMP_WINDOW_MS + 60_000],
  ])('refuses a correctly signed timestamp %s (401: a replayed batch)', async (_name, offset) => {
    await expect(parse([bounce], { at: Date.now() + offset })).rejects.toMatchObject({
      code: 'UNAUTHORIZED',
      statusCode: 401,
    });
  });
});

describe('SendGrid event names', () => {
  // Object.prototype's names are not event names: they used to become a kind (a function) and a
  // 500 at the database write.
  it.each(['constructor', 'toString', '__proto__', 'hasOwnProperty', 'valueOf'])(
    'ignores an event named %s like any unknown event',
    async (name) => {
      const events = [{ email: 'ada@example.com', event: name, sg_message_id: 'sg-2.f1', timestamp: 1 }];
      expect(await parse(events)).toEqual([]);
      expect(await parse(events, { signed: false })).toEqual([]);
    },
  );
});
