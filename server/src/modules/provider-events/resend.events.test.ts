import { describe, expect, it } from 'vitest';
import type { ProviderEventDeps } from './provider-event.ts';
import { parseResendEvents } from './resend.events.ts';
import { certificateCache } from './ses.events.ts';

const deps: ProviderEventDeps = {
  fetchText: () => Promise.reject(new Error('no fetch expected')),
  certificateCache: certificateCache(),
  claimToken: () => Promise.resolve(true),
};

/** Parses `event` as an unsigned Resend request (the Svix signature is tested over HTTP). */
function parse(event: unknown) {
  return parseResendEvents(
    { adapterId: 'adp_1', headers: {}, body: Buffer.from(JSON.stringify(event)), config: {} },
    deps,
  );
}

describe('Resend events that are not about an email', () => {
  // Resend posts contact and domain events to the same endpoint (https://resend.com/docs/dashboard/webhooks/event-types):
  // a 400 made Svix retry them and eventually disable the endpoint.
  it.each([
    {
      type: 'contact.created',
      created_at: '2026-11-23T12:00:00.000Z',
      data: { id: 'e169aa45-1ecf-4183-9955-b1499d5701d3', audience_id: 'a1', email: 'ada@example.com' },
    },
    {
      type: 'domain.updated',
      created_at: '2026-11-23T12:00:00.000Z',
      data: { id: 'd1', name: 'example.com' },
    },
    { type: 'contact.deleted', data: {} },
    { type: 'something.new' },
  ])('acknowledges $type with nothing recorded', async (event) => {
    expect(await parse(event)).toEqual([]);
  });

  it('refuses a body without type (400)', async () => {
    await expect(parse({ data: { email_id: 'x' } })).rejects.toMatchObject({
      code: 'VALIDATION_ERROR',
      statusCode: 400,
    });
    await expect(parse([])).rejects.toMatchObject({ code: 'VALIDATION_ERROR' });
  });
});

describe('Resend event types', () => {
  it.each(['constructor', 'toString', '__proto__', 'hasOwnProperty'])(
    'ignores an email event typed %s like any unknown type',
    async (type) => {
      expect(await parse({ type, data: { email_id: 'rs-1', to: ['ada@example.com'] } })).toEqual([]);
    },
  );

  it('still records the email events', async () => {
    expect(
      await parse({ type: 'email.delivered', data: { email_id: 'rs-1', to: ['ada@example.com'] } }),
    ).toMatchObject([{ kind: 'delivered', messageIds: ['rs-1'], recipients: [] }]);
  });
});
