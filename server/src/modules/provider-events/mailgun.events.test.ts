import { createHmac, randomBytes } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { MAILGUN_SIGNATURE_WINDOW_MS, parseMailgunEvents } from './mailgun.events.ts';
import type { ProviderEventDeps } from './provider-event.ts';
import { certificateCache } from './ses.events.ts';

const signingKey = `key-${randomBytes(16).toString('hex')}`;

/** How long each claim asked to keep its token (ms), by `<adapterId> <token>`. */
let kept = new Map<string, number>();

/** Deps whose token claims are kept in memory (the database's claim, claimProviderEventToken, in the HTTP tests). */
function newDeps(): ProviderEventDeps {
  const claimed = new Set<string>();
  kept = new Map();
  return {
    fetchText: () => Promise.reject(new Error('no fetch expected')),
    certificateCache: certificateCache(),
    claimToken: (adapterId, token, keepMs) => {
      const key = `${adapterId} ${token}`;
      kept.set(key, keepMs);
      if (claimed.has(key)) return Promise.resolve(false);
      claimed.add(key);
      return Promise.resolve(true);
    },
  };
}

/** A Mailgun body signed as Mailgun signs it, for a permanent failure (a hard bounce). */
function signedBody(options: { at?: number; token?: string } = {}) {
  const timestamp = String(Math.floor((options.at ?? Date.now()) / 1000));
  const token = options.token ?? randomBytes(25).toString('hex');
  const signature = createHmac('sha256', signingKey)
    .update(timestamp + token)
    .digest('hex');
  return {
    signature: { timestamp, token, signature },
    'event-data': {
      event: 'failed',
      severity: 'permanent',
      timestamp: Date.now() / 1000,
      recipient: 'victim@example.com',
      message: { headers: { 'message-id': 'mg-1@mg.example.test' } },
    },
  };
}

function parse(body: unknown, deps: ProviderEventDeps, adapterId = 'adp_1', key: string | null = signingKey) {
  return parseMailgunEvents(
    {
      adapterId,
      headers: { 'content-type': 'application/json' },
      body: Buffer.from(JSON.stringify(body)),
      config: key ? { webhookSigningKey: key } : {},
    },
    deps,
  );
}

describe('Mailgun signatures: freshness and replays', () => {
  it('accepts a fresh signature once; the same signature block again is 401, whatever event it carries', async () => {
    const deps = newDeps();
    const body = signedBody();
    expect(await parse(body, deps)).toHaveLength(1);
    await expect(parse(body, deps)).rejects.toMatchObject({ code: 'UNAUTHORIZED', statusCode: 401 });
    const forged = { ...body, 'event-data': { ...body['event-data'], recipient: 'other@example.com' } };
    await expect(parse(forged, deps)).rejects.toMatchObject({ code: 'UNAUTHORIZED' });
  });

  it('remembers tokens per adapter: the same token at another adapter is its own', async () => {
    const deps = newDeps();
    const body = signedBody();
    expect(await parse(body, deps, 'adp_1')).toHaveLength(1);
    expect(await parse(body, deps, 'adp_2')).toHaveLength(1);
  });

  it.each([
    ['old', -(MAILGUN_SIGNATURE_WINDOW_MS + 60_000)],
    ['in the future', MAILGUN_SIGNATURE_WINDOW_MS + 60_000],
    ['a day old', -86_400_000],
  ])('refuses a correctly signed timestamp %s (401)', async (_name, offset) => {
    const body = signedBody({ at: Date.now() + offset });
    await expect(parse(body, newDeps())).rejects.toMatchObject({ code: 'UNAUTHORIZED', statusCode: 401 });
  });

  it('accepts a timestamp a little off (clock skew within the window)', async () => {
    const body = signedBody({ at: Date.now() - MAILGUN_SIGNATURE_WINDOW_MS + 30_000 });
    expect(await parse(body, newDeps())).toHaveLength(1);
  });

  it('a wrong signature is refused before its token is remembered', async () => {
    const deps = newDeps();
    const body = signedBody();
    const wrong = { ...body, signature: { ...body.signature, signature: '0'.repeat(64) } };
    await expect(parse(wrong, deps)).rejects.toMatchObject({ code: 'UNAUTHORIZED' });
    expect(await parse(body, deps)).toHaveLength(1);
  });

  it('claims each token for at least the whole window of timestamps it could be replayed in', async () => {
    const deps = newDeps();
    const body = signedBody({ token: 'kept-token' });
    expect(await parse(body, deps)).toHaveLength(1);
    expect(kept.get('adp_1 kept-token')).toBeGreaterThanOrEqual(2 * MAILGUN_SIGNATURE_WINDOW_MS);
  });

  it('without a signing key configured nothing is checked (as before)', async () => {
    const deps = newDeps();
    const body = signedBody({ at: Date.now() - 86_400_000 });
    expect(await parse(body, deps, 'adp_1', null)).toHaveLength(1);
    expect(await parse(body, deps, 'adp_1', null)).toHaveLength(1);
  });
});
