import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestContext, type TestContext } from './helpers/app.ts';
import { sessionHeaders } from './helpers/auth.ts';
import { dataOf, expectError } from './helpers/factories.ts';
import { type ProviderTeam, postProviderEvent, providerTeam, sentEmail } from './helpers/provider-teams.ts';
import type { SendingTeam } from './helpers/sending-team.ts';

/*
 * Review findings, session 13, on POST /api/provider-events/:adapterId/:token with the URL's token
 * alone (an adapter without a signing secret): a bounce or complaint suppressed any address it
 * named (one of 6 KB failed the index: a 500 that lost the batch's other events); one request
 * naming one message thousands of times held the email's row lock for minutes; an event posted to
 * one adapter's URL moved emails another adapter of the team delivered; and the body was read
 * before the token was checked.
 */
describe('provider events a holder of one events URL cannot abuse', () => {
  let ctx: TestContext;

  beforeAll(async () => {
    ctx = await createTestContext('postgres');
  });
  afterAll(() => ctx?.close());

  const logOf = async (team: SendingTeam, id: string) =>
    dataOf(
      await ctx.app.inject({
        method: 'GET',
        url: `/api/logs/${id}`,
        headers: sessionHeaders(ctx.app, team.owner),
      }),
    );
  const suppressed = async (team: SendingTeam) =>
    (
      await dataOf(
        await ctx.app.inject({
          method: 'GET',
          url: '/api/suppressions',
          headers: sessionHeaders(ctx.app, team.owner),
        }),
      )
    ).items.map((item: { address: string }) => item.address);

  it('suppresses only recipients of the email; a 6 KB address is no 500 and loses no other event', async () => {
    const team = await providerTeam(ctx, 'sendgrid');
    const innocent = await sentEmail(ctx, team, 'sg-innocent-1', 'ada@example.com');
    const target = await sentEmail(ctx, team, 'sg-target-1', 'bob@example.com');
    const long = `${'x'.repeat(6_000)}@example.com`;
    const response = await postProviderEvent(
      ctx,
      team.eventsPath,
      JSON.stringify([
        {
          email: 'ada@example.com',
          event: 'delivered',
          sg_message_id: 'sg-innocent-1.f',
          timestamp: 1_700_000_000,
        },
        { email: long, event: 'spamreport', sg_message_id: 'sg-target-1.f', timestamp: 1_700_000_001 },
        {
          email: 'ceo@victim.example',
          event: 'bounce',
          type: 'bounce',
          sg_message_id: 'sg-target-1.f',
          timestamp: 1_700_000_002,
        },
      ]),
    );
    expect(response.statusCode, response.body).toBe(200);
    expect((await logOf(team, innocent)).status).toBe('delivered');
    expect((await logOf(team, target)).status).not.toBe('sent');
    expect(await suppressed(team)).toEqual([]);
    // A recipient of the email is still suppressed on its bounce.
    const own = await postProviderEvent(
      ctx,
      team.eventsPath,
      JSON.stringify([
        {
          email: 'bob@example.com',
          event: 'bounce',
          type: 'bounce',
          sg_message_id: 'sg-target-1.f',
          timestamp: 1_700_000_003,
        },
      ]),
    );
    expect(own.statusCode, own.body).toBe(200);
    expect(await suppressed(team)).toEqual(['bob@example.com']);
  });

  /**
   * Posts `events` (all of `id`'s message) to `team`'s events URL: 200 with every event received and
   * matched, within 10 s (a hard bound with a wide margin).
   * @returns the statuses of `id`'s history, sorted.
   */
  async function postedHistory(team: ProviderTeam, id: string, events: unknown[]): Promise<string[]> {
    const started = Date.now();
    const response = await postProviderEvent(ctx, team.eventsPath, JSON.stringify(events));
    expect(response.statusCode, response.body).toBe(200);
    expect(await dataOf(response)).toEqual({ received: events.length, matched: events.length });
    expect(Date.now() - started).toBeLessThan(10_000);
    const history = await dataOf(
      await ctx.app.inject({
        method: 'GET',
        url: `/api/logs/${id}/events`,
        headers: sessionHeaders(ctx.app, team.owner),
      }),
    );
    return history.map((event: { status: string }) => event.status).sort();
  }

  it('one message named thousands of times in one request is one status change', async () => {
    const team = await providerTeam(ctx, 'sendgrid');
    const id = await sentEmail(ctx, team, 'sg-repeat-1', 'ada@example.com');
    const events = Array.from({ length: 20_000 }, (_, n) => ({
      email: 'ada@example.com',
      event: 'delivered',
      sg_message_id: 'sg-repeat-1.f',
      timestamp: 1_700_000_000 + n,
    }));
    // A hard bound with a wide margin: a status round per event took 28 s for 20,000 on this machine.
    expect(await postedHistory(team, id, events)).toEqual(['delivered', 'queued', 'sent']);
  });

  it('naming a different address each time makes no repeat count again', async () => {
    const team = await providerTeam(ctx, 'sendgrid');
    const id = await sentEmail(ctx, team, 'sg-vary-1', 'ada@example.com');
    // Made-up addresses (none a recipient), then the recipient itself in two spellings.
    const events = [
      ...Array.from({ length: 20_000 }, (_, n) => ({
        email: `x${n}@example.com`,
        event: 'delivered',
        sg_message_id: 'sg-vary-1.f',
        timestamp: 1_700_000_000 + n,
      })),
      {
        email: 'ada@example.com',
        event: 'delivered',
        sg_message_id: 'sg-vary-1.f',
        timestamp: 1_700_100_000,
      },
      {
        email: 'ADA@example.com',
        event: 'delivered',
        sg_message_id: 'sg-vary-1.f',
        timestamp: 1_700_100_001,
      },
    ];
    // Before: 20,002 status rounds, 22 s on this machine, holding the email's row and a connection.
    // Now one history entry for the made-up addresses (an event naming no recipient), one for ada.
    expect(await postedHistory(team, id, events)).toEqual(['delivered', 'delivered', 'queued', 'sent']);
  });

  it('a NUL or a lone surrogate in one event loses no event of the batch', async () => {
    const team = await providerTeam(ctx, 'sendgrid');
    const id = await sentEmail(ctx, team, 'sg-nul-1', 'ada@example.com');
    const events = [
      { email: 'ada@example.com', event: 'delivered', sg_message_id: 'sg-nul-1.f', timestamp: 1_700_000_000 },
      {
        email: 'a\u0000@example.com',
        event: 'deferred',
        reason: 'try \ud800 later \u0000',
        sg_message_id: 'sg-nul-1.f',
        timestamp: 1_700_000_001,
      },
    ];
    // Before: 400 INVALID_INPUT for the whole batch (the database refused the NUL), so the
    // provider's retries of the same batch never recorded the delivery.
    const response = await postProviderEvent(ctx, team.eventsPath, JSON.stringify(events));
    expect(response.statusCode, response.body).toBe(200);
    const log = await dataOf(
      await ctx.app.inject({
        method: 'GET',
        url: `/api/logs/${id}`,
        headers: sessionHeaders(ctx.app, team.owner),
      }),
    );
    expect(log.status).toBe('delivered');
    const deferral = log.events.find(
      (event: { detail: { event?: string } }) => event.detail.event === 'deferred',
    );
    expect(deferral.detail.diagnostic).toBe('try \uFFFD later \uFFFD');
  });

  it("an event posted to one adapter's URL does not move an email another adapter of the team delivered", async () => {
    const signed = await providerTeam(ctx, 'sendgrid');
    const id = await sentEmail(ctx, signed, 'other-adapter-1', 'ada@example.com');
    // The same team gets a Postmark adapter without credentials: its URL's token alone authenticates.
    const postmark = await dataOf(
      await ctx.app.inject({
        method: 'POST',
        url: '/api/adapters',
        headers: sessionHeaders(ctx.app, signed.owner),
        payload: { name: 'Postmark', type: 'mailapi_server', config: { serverToken: 'pm-token' } },
      }),
      201,
    );
    const { eventsUrl } = await dataOf(
      await ctx.app.inject({
        method: 'GET',
        url: `/api/adapters/${postmark.id}`,
        headers: sessionHeaders(ctx.app, signed.owner),
      }),
    );
    const response = await postProviderEvent(
      ctx,
      new URL(eventsUrl).pathname,
      JSON.stringify({
        RecordType: 'Bounce',
        Type: 'HardBounce',
        MessageID: 'other-adapter-1',
        Email: 'ada@example.com',
        BouncedAt: new Date().toISOString(),
        Details: 'forged',
      }),
    );
    expect(await dataOf(response)).toEqual({ received: 1, matched: 0 });
    expect((await logOf(signed, id)).status).toBe('sent');
  });

  it('checks the URL before reading the body: a wrong token with 6 MB is 401, an unknown adapter 404', async () => {
    const team = await providerTeam(ctx, 'postmark');
    const big = 'x'.repeat(6 * 1024 * 1024);
    const wrongToken = team.eventsPath.replace(/[^/]+$/, 'A'.repeat(43));
    expectError(await postProviderEvent(ctx, wrongToken, big), 401, 'UNAUTHORIZED');
    const unknown = team.eventsPath.replace(/provider-events\/[^/]+/, 'provider-events/adp_unknown');
    expectError(await postProviderEvent(ctx, unknown, big), 404, 'NOT_FOUND');
    // With the right URL the limit applies as before.
    expect((await postProviderEvent(ctx, team.eventsPath, big)).statusCode).toBe(400);
  });
});
