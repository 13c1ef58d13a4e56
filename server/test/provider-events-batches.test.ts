import { createHmac, randomBytes, randomUUID } from 'node:crypto';
import { sql } from 'drizzle-orm';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { newId } from '../src/ids.ts';
import { createTestContext, type TestContext } from './helpers/app.ts';
import { sessionHeaders } from './helpers/auth.ts';
import { dataOf, expectError } from './helpers/factories.ts';
import type { FakeKind } from './helpers/fake-providers.ts';
import {
  providerTeam as newProviderTeam,
  postProviderEvent,
  sentEmail as recordedSentEmail,
} from './helpers/provider-teams.ts';
import type { SendingTeam } from './helpers/sending-team.ts';

/**
 * Issue #11 "Provider events in", the edges of what a provider may post: batches as large as the
 * route accepts (5 MB: far more values than PostgreSQL's 65,535 bound parameters), event types
 * that are Object.prototype's names, and Resend events that are not about an email. Each case
 * has its own team.
 */

let ctx: TestContext;

beforeAll(async () => {
  ctx = await createTestContext('postgres');
});

afterAll(async () => {
  await ctx?.close();
});

/** A new team with an adapter of `kind` (config `extra` added) and its eventsUrl (helpers/provider-teams.ts). */
const providerTeam = (kind: FakeKind, extra: Record<string, unknown> = {}) =>
  newProviderTeam(ctx, kind, extra);

/** Sends an email to `to` (queued) and records it as `sent` with `providerMessageId`. */
const sentEmail = (team: SendingTeam, providerMessageId: string, to?: string) =>
  recordedSentEmail(ctx, team, providerMessageId, to);

/**
 * `count` more sent emails of the team, copies of email `model` with their own id, providerMessageId
 * `${prefix}-<n>` and recipients `to(n)` (written directly: the send path is not under test here).
 */
async function copiesOf(model: string, count: number, prefix: string, to: (n: number) => string[]) {
  const rows = Array.from({ length: count }, (_, n) => ({
    id: newId('emailLog'),
    provider_message_id: `${prefix}-${n}`,
    to_addresses: to(n),
  }));
  await ctx.context.db.execute(sql`
    insert into email_logs (id, team_id, template_id, template_name, template_version_id, adapter_id,
      api_key_id, to_addresses, from_address, subject, variables, status, provider_message_id, job_id,
      sent_at)
    select v.id, l.team_id, l.template_id, l.template_name, l.template_version_id, l.adapter_id,
      l.api_key_id, v.to_addresses, l.from_address, l.subject, l.variables, 'sent', v.provider_message_id,
      l.job_id, now()
    from jsonb_to_recordset(${JSON.stringify(rows)}::jsonb)
      as v(id text, provider_message_id text, to_addresses text[])
    cross join email_logs l
    where l.id = ${model}`);
  return rows.map((row) => row.id);
}

const post = (pathname: string, body: string, headers: Record<string, string> = {}) =>
  postProviderEvent(ctx, pathname, body, headers);

async function log(team: SendingTeam, id: string) {
  return dataOf(
    await ctx.app.inject({
      method: 'GET',
      url: `/api/logs/${id}`,
      headers: sessionHeaders(ctx.app, team.owner),
    }),
  );
}

async function suppressionCount(team: SendingTeam): Promise<number> {
  const page = await dataOf(
    await ctx.app.inject({
      method: 'GET',
      url: '/api/suppressions?pageSize=1',
      headers: sessionHeaders(ctx.app, team.owner),
    }),
  );
  return page.total;
}

describe('provider events: batches as large as the route accepts', () => {
  it('a SendGrid batch of 17,000 hard bounces naming recipients of 1,700 emails is recorded (not a 500)', async () => {
    const team = await providerTeam('sendgrid');
    const model = await sentEmail(team, 'sg-model');
    // 17,000 recipient rows (16 columns each) and 17,000 suppressions (4 each): beyond 65,535
    // parameters had each value been one.
    const recipientsOf = (n: number) => Array.from({ length: 10 }, (_, r) => `r${n}x${r}@example.com`);
    const ids = await copiesOf(model, 1_700, 'sg-big', recipientsOf);
    const t = Math.floor(Date.now() / 1000);
    const events = ids.flatMap((_, n) =>
      recipientsOf(n).map((email) => ({
        email,
        timestamp: t,
        event: 'bounce',
        type: 'bounce',
        sg_message_id: `sg-big-${n}.filter0001`,
        reason: '550 5.1.1 unknown user',
      })),
    );
    const body = JSON.stringify(events);
    expect(body.length).toBeLessThan(5 * 1024 * 1024);
    expect(await dataOf(await post(team.eventsPath, body))).toEqual({ received: 17_000, matched: 17_000 });
    for (const n of [0, 849, 1_699]) {
      const row = await log(team, ids[n]!);
      expect(row.status).toBe('bounced');
      expect(row.recipients).toHaveLength(10);
      expect(row.recipients.every((r: { status: string }) => r.status === 'bounced')).toBe(true);
    }
    expect(await suppressionCount(team)).toBe(17_000);
  });

  it('a batch naming 68,000 message ids no email has is acknowledged, nothing matched', async () => {
    const team = await providerTeam('sendgrid');
    // Each sg_message_id is tried whole and before its first dot: two ids per event.
    const events = Array.from({ length: 34_000 }, (_, n) => ({
      event: 'delivered',
      sg_message_id: `u${n}.f`,
    }));
    expect(await dataOf(await post(team.eventsPath, JSON.stringify(events)))).toEqual({
      received: 34_000,
      matched: 0,
    });
  });
});

describe('provider events: types named like Object.prototype members are unknown types', () => {
  const names = ['constructor', 'toString', '__proto__', 'hasOwnProperty'];

  it('Resend: acknowledged and ignored (2xx), the email unchanged', async () => {
    const team = await providerTeam('resend');
    const id = await sentEmail(team, 'rs-proto-1');
    for (const type of names) {
      const body = JSON.stringify({ type, data: { email_id: 'rs-proto-1', to: ['ada@example.com'] } });
      expect(await dataOf(await post(team.eventsPath, body))).toEqual({ received: 0, matched: 0 });
    }
    expect((await log(team, id)).status).toBe('sent');
  });

  it('SendGrid: acknowledged and ignored (2xx), the email unchanged', async () => {
    const team = await providerTeam('sendgrid');
    const id = await sentEmail(team, 'sg-proto-1');
    const events = names.map((event) => ({ email: 'ada@example.com', event, sg_message_id: 'sg-proto-1.f' }));
    expect(await dataOf(await post(team.eventsPath, JSON.stringify(events)))).toEqual({
      received: 0,
      matched: 0,
    });
    expect((await log(team, id)).status).toBe('sent');
  });

  it('SES: an SNS message of such a Type is not a signed SNS message (401)', async () => {
    const team = await providerTeam('ses');
    for (const type of names) {
      const body = JSON.stringify({
        Type: type,
        MessageId: randomUUID(),
        Message: '{}',
        Timestamp: new Date().toISOString(),
        SignatureVersion: '1',
        Signature: 'c2lnbmF0dXJl',
        SigningCertURL: 'https://sns.us-east-1.amazonaws.com/SimpleNotificationService-0123.pem',
      });
      expectError(await post(team.eventsPath, body, { 'content-type': 'text/plain' }), 401, 'UNAUTHORIZED');
    }
  });
});

describe('provider events: times out of range', () => {
  it('an event timestamp of 1e20 seconds is taken as now (not a 500)', async () => {
    const team = await providerTeam('sendgrid');
    const id = await sentEmail(team, 'sg-time-1');
    const before = Date.now();
    const body = JSON.stringify([
      { email: 'ada@example.com', timestamp: 1e20, event: 'delivered', sg_message_id: 'sg-time-1.f' },
    ]);
    expect(await dataOf(await post(team.eventsPath, body))).toEqual({ received: 1, matched: 1 });
    const row = await log(team, id);
    expect(row.status).toBe('delivered');
    expect(Date.parse(row.deliveredAt)).toBeGreaterThanOrEqual(before - 1_000);
  });
});

describe('Resend events that are not about an email', () => {
  const secret = `whsec_${randomBytes(24).toString('base64')}`;

  function svixHeaders(body: string) {
    const id = `msg_${randomUUID()}`;
    const timestamp = String(Math.floor(Date.now() / 1000));
    const key = Buffer.from(secret.slice('whsec_'.length), 'base64');
    const signature = createHmac('sha256', key).update(`${id}.${timestamp}.${body}`).digest('base64');
    return { 'svix-id': id, 'svix-timestamp': timestamp, 'svix-signature': `v1,${signature}` };
  }

  it('signed contact.* and domain.* events are acknowledged (2xx) with nothing recorded', async () => {
    const team = await providerTeam('resend', { webhookSecret: secret });
    for (const event of [
      {
        type: 'contact.created',
        created_at: new Date().toISOString(),
        data: { id: randomUUID(), audience_id: randomUUID(), email: 'ada@example.com', unsubscribed: false },
      },
      {
        type: 'domain.updated',
        created_at: new Date().toISOString(),
        data: { id: randomUUID(), name: 'example.com', status: 'verified', records: [] },
      },
    ]) {
      const body = JSON.stringify(event);
      expect(await dataOf(await post(team.eventsPath, body, svixHeaders(body)))).toEqual({
        received: 0,
        matched: 0,
      });
    }
    expect(await suppressionCount(team)).toBe(0);
    const untyped = JSON.stringify({ data: { id: randomUUID() } });
    expectError(await post(team.eventsPath, untyped, svixHeaders(untyped)), 400, 'VALIDATION_ERROR');
  });
});
