import { createHmac, generateKeyPairSync, randomBytes, randomUUID, sign } from 'node:crypto';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildApp } from '../src/app.ts';
import { createContext } from '../src/context.ts';
import { createTestContext, type TestContext } from './helpers/app.ts';
import { sessionHeaders } from './helpers/auth.ts';
import { dataOf, expectError } from './helpers/factories.ts';
import type { FakeKind } from './helpers/fake-providers.ts';
import {
  providerTeam as newProviderTeam,
  postProviderEvent,
  sentEmail as recordedSentEmail,
} from './helpers/provider-teams.ts';
import { createTeamWithKey, type SendingTeam } from './helpers/sending-team.ts';
import { selfSignedSnsCertificate, signSnsMessage } from './helpers/sns-certificate.ts';

/**
 * Issue #11 "Provider events in": each provider's documented webhook payload, signed in the test
 * as the provider signs it, moves the email's status through `POST /api/provider-events/:adapterId/:token`;
 * bad signatures are 401; duplicates and late events leave the right final state; events are
 * matched within the adapter's team only; hard bounces and complaints suppress the address.
 * Each case has its own team.
 */

let ctx: TestContext;
/** The path of the local SNS's signing certificate (SNS's own shape: a hex name). */
const SNS_CERT_PATH = '/SimpleNotificationService-0123456789abcdef0123456789abcdef.pem';
let sns: {
  server: Server;
  origin: string;
  certPem: string;
  keyPem: string;
  subscribed: string[];
  /** Requests for a certificate so far. */
  certificateFetches: number;
};

beforeAll(async () => {
  const { certPem, keyPem } = selfSignedSnsCertificate();
  const subscribed: string[] = [];
  // The local "SNS": serves the signing certificate and records subscription confirmations.
  const server = createServer((request, response) => {
    // Any certificate name is served (and counted): what the handler refuses, it must not fetch.
    if (request.url?.startsWith('/SimpleNotificationService-')) {
      sns.certificateFetches += 1;
      response.writeHead(200, { 'content-type': 'application/x-pem-file' }).end(certPem);
    } else if (request.url?.startsWith('/confirm')) {
      subscribed.push(request.url);
      response.writeHead(200, { 'content-type': 'text/xml' }).end('<ConfirmSubscriptionResponse/>');
    } else {
      response.writeHead(404).end();
    }
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const origin = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  sns = { server, origin, certPem, keyPem, subscribed, certificateFetches: 0 };
  ctx = await createTestContext('postgres', { PROVIDER_EVENTS_SNS_ENDPOINT: origin });
});

afterAll(async () => {
  await ctx?.close();
  await new Promise((resolve) => sns?.server.close(resolve));
});

/** A new team with an adapter of `kind` (config `extra` added) and its eventsUrl (helpers/provider-teams.ts). */
const providerTeam = (kind: FakeKind, extra: Record<string, unknown> = {}) =>
  newProviderTeam(ctx, kind, extra);

/** Sends an email to `to` (queued) and records it as `sent` with `providerMessageId`. */
const sentEmail = (team: SendingTeam, providerMessageId: string, to?: string) =>
  recordedSentEmail(ctx, team, providerMessageId, to);

async function log(team: SendingTeam, id: string) {
  return dataOf(
    await ctx.app.inject({
      method: 'GET',
      url: `/api/logs/${id}`,
      headers: sessionHeaders(ctx.app, team.owner),
    }),
  );
}

async function history(team: SendingTeam, id: string) {
  return (await dataOf(
    await ctx.app.inject({
      method: 'GET',
      url: `/api/logs/${id}/events`,
      headers: sessionHeaders(ctx.app, team.owner),
    }),
  )) as { status: string; at: string; source: string; detail: Record<string, unknown> }[];
}

async function suppressed(team: SendingTeam): Promise<string[]> {
  const page = await dataOf(
    await ctx.app.inject({
      method: 'GET',
      url: '/api/suppressions',
      headers: sessionHeaders(ctx.app, team.owner),
    }),
  );
  return page.items.map((item: { address: string }) => item.address);
}

/** An ISO time `seconds` from now (events happen after the send, so the history reads in order). */
function iso(seconds: number): string {
  return new Date(Math.floor(Date.now() / 1000) * 1000 + seconds * 1000).toISOString();
}

const post = (pathname: string, body: string, headers: Record<string, string> = {}) =>
  postProviderEvent(ctx, pathname, body, headers);

// --- Resend (Svix) ---------------------------------------------------------------------------

const RESEND_SECRET = `whsec_${randomBytes(24).toString('base64')}`;

/** Svix headers for `body` (https://docs.svix.com/receiving/verifying-payloads/how-manual). */
function svixHeaders(body: string, secret = RESEND_SECRET, at = new Date()) {
  const id = `msg_${randomUUID()}`;
  const timestamp = String(Math.floor(at.getTime() / 1000));
  const key = Buffer.from(secret.slice('whsec_'.length), 'base64');
  const signature = createHmac('sha256', key).update(`${id}.${timestamp}.${body}`).digest('base64');
  return { 'svix-id': id, 'svix-timestamp': timestamp, 'svix-signature': `v1,${signature}` };
}

function resendEvent(type: string, emailId: string, data: Record<string, unknown> = {}, at = new Date()) {
  return JSON.stringify({
    type,
    created_at: at.toISOString(),
    data: {
      created_at: at.toISOString(),
      email_id: emailId,
      from: 'Acme <onboarding@resend.dev>',
      to: ['ada@example.com'],
      subject: 'Hi Ada',
      ...data,
    },
  });
}

describe('Resend events (Svix signature)', () => {
  it('a signed email.delivered moves the email to delivered; a bad signature is 401', async () => {
    const team = await providerTeam('resend', { webhookSecret: RESEND_SECRET });
    const id = await sentEmail(team, '4ef9a417-02e9-4d39-ad75-9611e0fcc33c');
    const at = new Date(Date.now() + 2_000);
    const body = resendEvent('email.delivered', '4ef9a417-02e9-4d39-ad75-9611e0fcc33c', {}, at);

    const forged = await post(
      team.eventsPath,
      body,
      svixHeaders(body, `whsec_${randomBytes(24).toString('base64')}`),
    );
    expectError(forged, 401, 'UNAUTHORIZED');
    expectError(await post(team.eventsPath, body), 401, 'UNAUTHORIZED');
    // Svix refuses signatures more than 5 minutes away from now (replays).
    const stale = svixHeaders(body, RESEND_SECRET, new Date(Date.now() - 10 * 60_000));
    expectError(await post(team.eventsPath, body, stale), 401, 'UNAUTHORIZED');
    expect((await log(team, id)).status).toBe('sent');

    const accepted = await post(team.eventsPath, body, svixHeaders(body));
    expect(await dataOf(accepted)).toEqual({ received: 1, matched: 1 });
    const row = await log(team, id);
    expect(row.status).toBe('delivered');
    expect(row.deliveredAt).toBe(at.toISOString());
    const entries = await history(team, id);
    expect(entries.at(-1)).toMatchObject({
      status: 'delivered',
      at: at.toISOString(),
      source: 'provider:mailapi_a',
      detail: { event: 'email.delivered' },
    });
  });

  it('a permanent email.bounced ends in bounced with the diagnostic and suppresses the address', async () => {
    const team = await providerTeam('resend', { webhookSecret: RESEND_SECRET });
    const id = await sentEmail(team, 'rs-bounce-1', 'gone@example.com');
    const body = resendEvent('email.bounced', 'rs-bounce-1', {
      to: ['gone@example.com'],
      bounce: {
        message: "The recipient's email provider sent a hard bounce message.",
        subType: 'General',
        type: 'Permanent',
      },
    });
    await dataOf(await post(team.eventsPath, body, svixHeaders(body)));
    const row = await log(team, id);
    expect(row.status).toBe('bounced');
    expect(row.errorMessage).toBe("The recipient's email provider sent a hard bounce message.");
    expect(row.bouncedAt).not.toBeNull();
    expect(await suppressed(team)).toEqual(['gone@example.com']);
  });
});

// --- SendGrid (ECDSA) --------------------------------------------------------------------------

describe('SendGrid events (ECDSA signature)', () => {
  const { publicKey, privateKey } = generateKeyPairSync('ec', { namedCurve: 'prime256v1' });
  const publicKeyBase64 = publicKey.export({ format: 'der', type: 'spki' }).toString('base64');

  function sendgridHeaders(body: string, key = privateKey) {
    const timestamp = String(Math.floor(Date.now() / 1000));
    const signature = sign('sha256', Buffer.from(timestamp + body), { key, dsaEncoding: 'der' }).toString(
      'base64',
    );
    return {
      'x-twilio-email-event-webhook-signature': signature,
      'x-twilio-email-event-webhook-timestamp': timestamp,
    };
  }

  it('a signed batch (processed, delivered, open) moves the email to opened; a bad signature is 401', async () => {
    const team = await providerTeam('sendgrid', { webhookPublicKey: publicKeyBase64 });
    const id = await sentEmail(team, 'W86EgYT6SQKk0lRflfLRsA');
    const t = Math.floor(Date.now() / 1000) - 120;
    const base = {
      email: 'ada@example.com',
      sg_message_id: 'W86EgYT6SQKk0lRflfLRsA.filterdrecv-5645d9c87f-78xgx-1-5E4DE4DF-2.0',
    };
    const body = JSON.stringify([
      { ...base, timestamp: t, event: 'processed', sg_event_id: 'ev-1', 'smtp-id': '<a@b>' },
      { ...base, timestamp: t + 1, event: 'delivered', sg_event_id: 'ev-2', response: '250 OK' },
      {
        ...base,
        timestamp: t + 2,
        event: 'open',
        sg_event_id: 'ev-3',
        useragent: 'Mozilla/5.0',
        ip: '1.2.3.4',
      },
    ]);
    const other = generateKeyPairSync('ec', { namedCurve: 'prime256v1' }).privateKey;
    expectError(await post(team.eventsPath, body, sendgridHeaders(body, other)), 401, 'UNAUTHORIZED');
    const tampered = sendgridHeaders(body);
    expectError(await post(team.eventsPath, body.replace('open', 'opex'), tampered), 401, 'UNAUTHORIZED');

    expect(await dataOf(await post(team.eventsPath, body, sendgridHeaders(body)))).toEqual({
      received: 2,
      matched: 2,
    });
    const row = await log(team, id);
    expect(row.status).toBe('opened');
    expect(row.deliveredAt).toBe(new Date((t + 1) * 1000).toISOString());
    expect(row.openedAt).toBe(new Date((t + 2) * 1000).toISOString());
  });

  it('a spamreport ends in spam and suppresses the address; a deferral is history only', async () => {
    const team = await providerTeam('sendgrid', { webhookPublicKey: publicKeyBase64 });
    const id = await sentEmail(team, 'sg-spam-1', 'grumpy@example.com');
    const t = Math.floor(Date.now() / 1000) + 1;
    const deferred = JSON.stringify([
      {
        email: 'grumpy@example.com',
        timestamp: t,
        event: 'deferred',
        sg_message_id: 'sg-spam-1.filter1',
        response: '400 try again later',
        attempt: '1',
      },
    ]);
    await dataOf(await post(team.eventsPath, deferred, sendgridHeaders(deferred)));
    expect((await log(team, id)).status).toBe('sent');
    const spam = JSON.stringify([
      {
        email: 'grumpy@example.com',
        timestamp: t + 5,
        event: 'spamreport',
        sg_message_id: 'sg-spam-1.filter1',
      },
    ]);
    await dataOf(await post(team.eventsPath, spam, sendgridHeaders(spam)));
    expect((await log(team, id)).status).toBe('spam');
    expect(await suppressed(team)).toEqual(['grumpy@example.com']);
    const entries = await history(team, id);
    expect(entries.map((e) => [e.status, e.detail.bounceType ?? null])).toEqual([
      ['queued', null],
      ['sent', null],
      ['bounced', 'deferral'],
      ['spam', null],
    ]);
  });
});

// --- Mailgun (HMAC signing key) ------------------------------------------------------------------

describe('Mailgun events (HMAC signing key)', () => {
  const signingKey = `key-${randomBytes(16).toString('hex')}`;

  function mailgunBody(eventData: Record<string, unknown>, key = signingKey) {
    const timestamp = String(Math.floor(Date.now() / 1000));
    const token = randomBytes(25).toString('hex');
    const signature = createHmac('sha256', key)
      .update(timestamp + token)
      .digest('hex');
    return JSON.stringify({ signature: { timestamp, token, signature }, 'event-data': eventData });
  }

  function eventData(event: string, messageId: string, extra: Record<string, unknown> = {}) {
    return {
      event,
      id: randomUUID(),
      timestamp: Date.now() / 1000,
      recipient: 'ada@example.com',
      message: {
        headers: { 'message-id': messageId, to: 'ada@example.com', from: 'sender@mg.example.test' },
      },
      ...extra,
    };
  }

  it('a signed delivered event matches the <id> the send stored; a bad signature is 401', async () => {
    const team = await providerTeam('mailgun', { webhookSigningKey: signingKey });
    const id = await sentEmail(team, '<20240101120000.1.ABCDEF@mg.example.test>');
    const good = mailgunBody(eventData('delivered', '20240101120000.1.ABCDEF@mg.example.test'));
    const forged = mailgunBody(
      eventData('delivered', '20240101120000.1.ABCDEF@mg.example.test'),
      'key-wrong',
    );
    expectError(await post(team.eventsPath, forged), 401, 'UNAUTHORIZED');
    expect((await log(team, id)).status).toBe('sent');
    expect(await dataOf(await post(team.eventsPath, good))).toEqual({ received: 1, matched: 1 });
    expect((await log(team, id)).status).toBe('delivered');
  });

  it('refuses a replayed signature block (any event-data) and a stale timestamp: 401, nothing suppressed', async () => {
    const team = await providerTeam('mailgun', { webhookSigningKey: signingKey });
    const id = await sentEmail(team, '<mg-replay@mg.example.test>', 'ada@example.com');
    const delivered = JSON.parse(mailgunBody(eventData('delivered', 'mg-replay@mg.example.test')));
    await dataOf(await post(team.eventsPath, JSON.stringify(delivered)));
    // The signature covers timestamp + token only: the captured block with a forged permanent failure.
    const forged = {
      signature: delivered.signature,
      'event-data': eventData('failed', 'mg-replay@mg.example.test', { severity: 'permanent' }),
    };
    expectError(await post(team.eventsPath, JSON.stringify(forged)), 401, 'UNAUTHORIZED');
    const timestamp = String(Math.floor(Date.now() / 1000) - 3_600);
    const token = randomBytes(25).toString('hex');
    const signature = createHmac('sha256', signingKey)
      .update(timestamp + token)
      .digest('hex');
    const stale = { signature: { timestamp, token, signature }, 'event-data': forged['event-data'] };
    expectError(await post(team.eventsPath, JSON.stringify(stale)), 401, 'UNAUTHORIZED');
    expect((await log(team, id)).status).toBe('delivered');
    expect(await suppressed(team)).toEqual([]);
  });

  it('refuses a signature block replayed to another process (the tokens are shared in the database)', async () => {
    const team = await providerTeam('mailgun', { webhookSigningKey: signingKey });
    const id = await sentEmail(team, '<mg-elsewhere@mg.example.test>', 'ada@example.com');
    // "Another process": a second app on the same database, with its own memory of tokens.
    const { config, database, queue, encryptionKey } = ctx.app.ctx;
    const elsewhereContext = await createContext({ config, database, queue, encryptionKey });
    const elsewhere = await buildApp(elsewhereContext);
    await elsewhere.ready();
    try {
      const delivered = JSON.parse(mailgunBody(eventData('delivered', 'mg-elsewhere@mg.example.test')));
      await dataOf(await post(team.eventsPath, JSON.stringify(delivered)));
      const forged = {
        signature: delivered.signature,
        'event-data': eventData('failed', 'mg-elsewhere@mg.example.test', { severity: 'permanent' }),
      };
      const replayed = await elsewhere.inject({
        method: 'POST',
        url: team.eventsPath,
        headers: { 'content-type': 'application/json' },
        payload: JSON.stringify(forged),
      });
      expectError(replayed, 401, 'UNAUTHORIZED');
      // A fresh block is accepted there.
      const fresh = await elsewhere.inject({
        method: 'POST',
        url: team.eventsPath,
        headers: { 'content-type': 'application/json' },
        payload: mailgunBody(eventData('opened', 'mg-elsewhere@mg.example.test')),
      });
      expect(await dataOf(fresh)).toEqual({ received: 1, matched: 1 });
    } finally {
      await elsewhere.close();
      await elsewhereContext.close();
    }
    expect((await log(team, id)).status).toBe('opened');
    expect(await suppressed(team)).toEqual([]);
  });

  it('a temporary failure is history only; a permanent one bounces with the diagnostic and suppresses', async () => {
    const team = await providerTeam('mailgun', { webhookSigningKey: signingKey });
    const id = await sentEmail(team, '<mg-bounce@mg.example.test>', 'nobody@example.com');
    const status = (message: string, code: number) => ({
      'delivery-status': { message, code, description: '' },
    });
    const soft = mailgunBody(
      eventData('failed', 'mg-bounce@mg.example.test', {
        severity: 'temporary',
        recipient: 'nobody@example.com',
        ...status('452 mailbox full', 452),
      }),
    );
    await dataOf(await post(team.eventsPath, soft));
    let row = await log(team, id);
    expect(row.status).toBe('sent');
    expect(row.errorMessage).toBeNull();
    expect(await suppressed(team)).toEqual([]);
    const hard = mailgunBody(
      eventData('failed', 'mg-bounce@mg.example.test', {
        severity: 'permanent',
        recipient: 'nobody@example.com',
        reason: 'bounce',
        ...status('550 5.1.1 The email account that you tried to reach does not exist', 550),
      }),
    );
    await dataOf(await post(team.eventsPath, hard));
    row = await log(team, id);
    expect(row.status).toBe('bounced');
    expect(row.errorMessage).toBe('550 5.1.1 The email account that you tried to reach does not exist');
    expect(await suppressed(team)).toEqual(['nobody@example.com']);
    const bounces = (await history(team, id)).filter((e) => e.status === 'bounced');
    expect(bounces.map((e) => e.detail.bounceType)).toEqual(['soft', 'hard']);
  });
});

// --- Postmark (basic auth / token header) --------------------------------------------------------

describe('Postmark events (basic auth and token header)', () => {
  const auth = {
    webhookUsername: 'postmark',
    webhookPassword: 'pm-secret-password',
    webhookToken: 'pm-header-token',
  };
  const basic = `Basic ${Buffer.from('postmark:pm-secret-password').toString('base64')}`;

  it('authenticated Delivery and Click records move the email; wrong credentials are 401', async () => {
    const team = await providerTeam('postmark', auth);
    const id = await sentEmail(team, '883953f4-6105-42a2-a16a-77a8eac79483');
    const [deliveredAt, clickedAt] = [iso(2), iso(5)];
    const delivery = JSON.stringify({
      RecordType: 'Delivery',
      ServerID: 23,
      MessageStream: 'outbound',
      MessageID: '883953f4-6105-42a2-a16a-77a8eac79483',
      Recipient: 'ada@example.com',
      Tag: '',
      DeliveredAt: deliveredAt,
      Details: 'Test delivery webhook details',
      Metadata: {},
    });
    const wrongPassword = `Basic ${Buffer.from('postmark:nope').toString('base64')}`;
    expectError(
      await post(team.eventsPath, delivery, {
        authorization: wrongPassword,
        'x-postmark-webhook-token': 'pm-header-token',
      }),
      401,
      'UNAUTHORIZED',
    );
    expectError(
      await post(team.eventsPath, delivery, { authorization: basic, 'x-postmark-webhook-token': 'nope' }),
      401,
      'UNAUTHORIZED',
    );
    expectError(await post(team.eventsPath, delivery), 401, 'UNAUTHORIZED');
    const headers = { authorization: basic, 'x-postmark-webhook-token': 'pm-header-token' };
    await dataOf(await post(team.eventsPath, delivery, headers));
    const click = JSON.stringify({
      RecordType: 'Click',
      MessageStream: 'outbound',
      ClickLocation: 'HTML',
      Platform: 'Desktop',
      OriginalLink: 'https://example.com/welcome',
      MessageID: '883953f4-6105-42a2-a16a-77a8eac79483',
      Recipient: 'ada@example.com',
      ReceivedAt: clickedAt,
      Metadata: {},
    });
    await dataOf(await post(team.eventsPath, click, headers));
    const row = await log(team, id);
    expect(row.status).toBe('clicked');
    expect(row.deliveredAt).toBe(deliveredAt);
    expect(row.clickedAt).toBe(clickedAt);
    expect((await history(team, id)).at(-1)?.detail.url).toBe('https://example.com/welcome');
  });

  it('a HardBounce suppresses the address; without configured credentials the token alone authenticates', async () => {
    const team = await providerTeam('postmark');
    const id = await sentEmail(team, 'pm-hard-1', 'bad@example.com');
    const bounce = JSON.stringify({
      RecordType: 'Bounce',
      ID: 4323372036,
      Type: 'HardBounce',
      TypeCode: 1,
      Name: 'Hard bounce',
      MessageID: 'pm-hard-1',
      Description: 'The server was unable to deliver your message (ex: unknown user, mailbox not found).',
      Details: 'smtp;550 5.1.1 The email account that you tried to reach does not exist.',
      Email: 'bad@example.com',
      BouncedAt: '2026-11-23T12:10:00.000Z',
      Inactive: true,
    });
    await dataOf(await post(team.eventsPath, bounce));
    // Postmark retries a webhook it thinks failed: the same bounce again changes nothing.
    expect(await dataOf(await post(team.eventsPath, bounce))).toEqual({ received: 1, matched: 1 });
    const row = await log(team, id);
    expect(row.status).toBe('bounced');
    expect(row.bouncedAt).toBe('2026-11-23T12:10:00.000Z');
    expect(row.errorMessage).toBe('smtp;550 5.1.1 The email account that you tried to reach does not exist.');
    expect(await suppressed(team)).toEqual(['bad@example.com']);
  });
});

// --- Amazon SES via SNS --------------------------------------------------------------------------

/** Signs an SNS message as SNS does (SignatureVersion 2 = SHA256withRSA over the canonical fields). */
function snsMessage(fields: Record<string, string>, keyPem = sns.keyPem) {
  const version = fields.SignatureVersion ?? '2';
  const message: Record<string, string> = {
    MessageId: randomUUID(),
    TopicArn: 'arn:aws:sns:eu-west-1:123456789012:ses-events',
    Timestamp: new Date().toISOString(),
    SignatureVersion: version,
    SigningCertURL: `${sns.origin}${SNS_CERT_PATH}`,
    ...fields,
  };
  signSnsMessage(message, keyPem);
  return JSON.stringify(message);
}

function sesNotification(event: Record<string, unknown>, messageId: string, signatureVersion = '2') {
  return snsMessage({
    Type: 'Notification',
    SignatureVersion: signatureVersion,
    Message: JSON.stringify({
      mail: {
        timestamp: new Date().toISOString(),
        source: 'sender@example.com',
        messageId,
        destination: ['ada@example.com'],
      },
      ...event,
    }),
  });
}

describe('Amazon SES events (SNS signature)', () => {
  it('confirms a subscription from an SNS origin only, verifies signatures, and moves the status', async () => {
    const team = await providerTeam('ses');
    const id = await sentEmail(team, '010701234567-abcd-ef01-2345-6789abcdef01-000000');
    const snsHeaders = {
      'content-type': 'text/plain; charset=UTF-8',
      'x-amz-sns-message-type': 'Notification',
    };

    const confirm = snsMessage({
      Type: 'SubscriptionConfirmation',
      Token: 'token-1',
      Message: 'You have chosen to subscribe to the topic.',
      SubscribeURL: `${sns.origin}/confirm?Action=ConfirmSubscription&Token=token-1`,
    });
    await dataOf(await post(team.eventsPath, confirm, snsHeaders));
    expect(sns.subscribed).toContain('/confirm?Action=ConfirmSubscription&Token=token-1');

    const elsewhere = snsMessage({
      Type: 'SubscriptionConfirmation',
      Token: 'token-2',
      Message: 'You have chosen to subscribe to the topic.',
      SubscribeURL: 'http://169.254.169.254/latest/meta-data/',
    });
    expectError(await post(team.eventsPath, elsewhere, snsHeaders), 400, 'VALIDATION_ERROR');
    const foreignCert = JSON.stringify({
      ...JSON.parse(sesNotification({ eventType: 'Delivery', delivery: {} }, 'x')),
      SigningCertURL: 'https://evil.example.com/cert.pem',
    });
    expectError(await post(team.eventsPath, foreignCert, snsHeaders), 401, 'UNAUTHORIZED');

    const delivery = sesNotification(
      {
        eventType: 'Delivery',
        delivery: {
          timestamp: '2026-11-23T12:00:01.000Z',
          processingTimeMillis: 546,
          recipients: ['ada@example.com'],
          smtpResponse: '250 2.6.0 Message received',
          reportingMTA: 'a8-70.smtp-out.amazonses.com',
        },
      },
      '010701234567-abcd-ef01-2345-6789abcdef01-000000',
    );
    const forged = JSON.stringify({
      ...JSON.parse(delivery),
      Signature: JSON.parse(snsMessage({ Type: 'Notification', Message: '{}' })).Signature,
    });
    expectError(await post(team.eventsPath, forged, snsHeaders), 401, 'UNAUTHORIZED');
    expect((await log(team, id)).status).toBe('sent');
    await dataOf(await post(team.eventsPath, delivery, snsHeaders));
    const row = await log(team, id);
    expect(row.status).toBe('delivered');
    expect(row.deliveredAt).toBe('2026-11-23T12:00:01.000Z');
  });

  it('refuses old messages and odd certificate URLs (401); a failed confirmation is 503 without the token', async () => {
    const team = await providerTeam('ses');
    const id = await sentEmail(team, 'ses-old-1');
    const delivery = (fields: Record<string, string>) =>
      snsMessage({
        Type: 'Notification',
        Message: JSON.stringify({ eventType: 'Delivery', mail: { messageId: 'ses-old-1' }, delivery: {} }),
        ...fields,
      });
    const old = delivery({ Timestamp: new Date(Date.now() - 2 * 3_600_000).toISOString() });
    expectError(await post(team.eventsPath, old, { 'content-type': 'text/plain' }), 401, 'UNAUTHORIZED');
    const fetchesBefore = sns.certificateFetches;
    for (const url of [
      `${sns.origin}${SNS_CERT_PATH}?x=1`,
      `${sns.origin}/SimpleNotificationService-x.pem`,
    ]) {
      const odd = delivery({ SigningCertURL: url });
      expectError(await post(team.eventsPath, odd, { 'content-type': 'text/plain' }), 401, 'UNAUTHORIZED');
    }
    expect(sns.certificateFetches).toBe(fetchesBefore);
    expect((await log(team, id)).status).toBe('sent');

    const confirm = snsMessage({
      Type: 'SubscriptionConfirmation',
      Token: 'secret-subscription-token',
      Message: 'You have chosen to subscribe to the topic.',
      SubscribeURL: `${sns.origin}/unavailable?Action=ConfirmSubscription&Token=secret-subscription-token`,
    });
    const failed = await post(team.eventsPath, confirm, { 'content-type': 'text/plain' });
    expectError(failed, 503, 'SERVICE_UNAVAILABLE');
    expect(failed.body).not.toContain('secret-subscription-token');
  });

  it('a Permanent bounce (SignatureVersion 1) and a Complaint suppress the named recipients', async () => {
    const team = await providerTeam('ses');
    const bounced = await sentEmail(team, 'ses-bounce-1', 'nouser@example.com');
    const complained = await sentEmail(team, 'ses-complaint-1', 'angry@example.com');
    const bounce = sesNotification(
      {
        eventType: 'Bounce',
        bounce: {
          bounceType: 'Permanent',
          bounceSubType: 'General',
          bouncedRecipients: [
            {
              emailAddress: 'nouser@example.com',
              action: 'failed',
              status: '5.1.1',
              diagnosticCode: 'smtp; 550 5.1.1 user unknown',
            },
          ],
          timestamp: '2026-11-23T12:00:02.000Z',
          feedbackId: 'fb-1',
        },
      },
      'ses-bounce-1',
      '1',
    );
    const complaint = sesNotification(
      {
        eventType: 'Complaint',
        complaint: {
          complainedRecipients: [{ emailAddress: 'angry@example.com' }],
          timestamp: '2026-11-23T12:00:03.000Z',
          feedbackId: 'fb-2',
          complaintFeedbackType: 'abuse',
        },
      },
      'ses-complaint-1',
    );
    await dataOf(await post(team.eventsPath, bounce, { 'content-type': 'text/plain' }));
    await dataOf(await post(team.eventsPath, complaint, { 'content-type': 'text/plain' }));
    const bouncedRow = await log(team, bounced);
    expect(bouncedRow.status).toBe('bounced');
    expect(bouncedRow.errorMessage).toBe('smtp; 550 5.1.1 user unknown');
    expect((await log(team, complained)).status).toBe('spam');
    expect((await suppressed(team)).sort()).toEqual(['angry@example.com', 'nouser@example.com']);
  });
});

// --- Rules common to every provider --------------------------------------------------------------

describe('provider events: order, duplicates, teams, authentication', () => {
  it('a delivered event after opened, and a repeated one, leave opened with each timestamp set once', async () => {
    const team = await providerTeam('postmark');
    const id = await sentEmail(team, 'pm-order-1');
    const record = (type: string, at: string) =>
      JSON.stringify(
        type === 'Delivery'
          ? { RecordType: 'Delivery', MessageID: 'pm-order-1', Recipient: 'ada@example.com', DeliveredAt: at }
          : {
              RecordType: 'Open',
              MessageID: 'pm-order-1',
              Recipient: 'ada@example.com',
              ReceivedAt: at,
              FirstOpen: true,
            },
      );
    const [delivered, opened, openedAgain] = [iso(2), iso(5), iso(9)];
    await dataOf(await post(team.eventsPath, record('Open', opened)));
    await dataOf(await post(team.eventsPath, record('Delivery', delivered)));
    await dataOf(await post(team.eventsPath, record('Open', openedAgain)));
    await dataOf(await post(team.eventsPath, record('Open', opened)));
    const row = await log(team, id);
    expect(row.status).toBe('opened');
    expect(row.openedAt).toBe(opened);
    // The late delivered does not move the status back, but it still sets deliveredAt (once).
    expect(row.deliveredAt).toBe(delivered);
    const entries = await history(team, id);
    expect(entries.map((e) => e.status)).toEqual([
      'queued',
      'sent',
      'delivered',
      'opened',
      'opened',
      'opened',
    ]);
    expect(
      entries.every(
        (e) =>
          e.source ===
          (e.status === 'queued' ? 'api' : e.status === 'sent' ? 'worker' : 'provider:mailapi_server'),
      ),
    ).toBe(true);
  });

  it("events naming another team's message id are acknowledged and change nothing", async () => {
    const mine = await providerTeam('postmark');
    const theirs = await providerTeam('postmark');
    const theirEmail = await sentEmail(theirs, 'shared-message-id');
    const body = JSON.stringify({
      RecordType: 'Bounce',
      Type: 'HardBounce',
      MessageID: 'shared-message-id',
      Email: 'ada@example.com',
      BouncedAt: new Date().toISOString(),
      Details: '550 no such user',
    });
    expect(await dataOf(await post(mine.eventsPath, body))).toEqual({ received: 1, matched: 0 });
    expect((await log(theirs, theirEmail)).status).toBe('sent');
    expect(await suppressed(theirs)).toEqual([]);
    expect(await suppressed(mine)).toEqual([]);
  });

  it('refuses a wrong token (401) and an unknown adapter (404); SMTP adapters have no eventsUrl', async () => {
    const team = await providerTeam('postmark');
    const body = JSON.stringify({
      RecordType: 'Delivery',
      MessageID: 'x',
      DeliveredAt: new Date().toISOString(),
    });
    const wrongToken = team.eventsPath.replace(/[^/]+$/, 'A'.repeat(43));
    expectError(await post(wrongToken, body), 401, 'UNAUTHORIZED');
    // Another adapter's token does not open this adapter.
    const other = await providerTeam('postmark');
    const crossed = `/api/provider-events/${team.providerAdapterId}/${other.eventsPath.split('/').at(-1)}`;
    expectError(await post(crossed, body), 401, 'UNAUTHORIZED');
    expectError(await post(`/api/provider-events/adp_nope/${'A'.repeat(43)}`, body), 404, 'NOT_FOUND');
    expectError(await post(team.eventsPath, 'not json'), 400, 'VALIDATION_ERROR');
    const bare = await ctx.app.inject({ method: 'POST', url: team.eventsPath, payload: 'no content type' });
    expectError(bare, 400, 'VALIDATION_ERROR');
    const empty = await ctx.app.inject({ method: 'POST', url: team.eventsPath });
    expectError(empty, 400, 'VALIDATION_ERROR');
    const smtp = await dataOf(
      await ctx.app.inject({
        method: 'GET',
        url: `/api/adapters/${team.adapterId}`,
        headers: sessionHeaders(ctx.app, team.owner),
      }),
    );
    expect(smtp.eventsUrl).toBeNull();
  });

  it('GET /api/logs/:id/events is the team’s only, also for API keys with logs:read', async () => {
    const team = await providerTeam('postmark');
    const id = await sentEmail(team, 'pm-hist-1');
    const other = await createTeamWithKey(ctx.app);
    const foreign = await ctx.app.inject({
      method: 'GET',
      url: `/api/logs/${id}/events`,
      headers: sessionHeaders(ctx.app, other.owner),
    });
    expectError(foreign, 404, 'NOT_FOUND');
    const key = await dataOf(
      await ctx.app.inject({
        method: 'POST',
        url: '/api/api-keys',
        headers: sessionHeaders(ctx.app, team.owner),
        payload: { name: 'reader', scopes: ['logs:read'] },
      }),
      201,
    );
    const viaKey = await dataOf(
      await ctx.app.inject({
        method: 'GET',
        url: `/api/logs/${id}/events`,
        headers: { 'x-api-key': key.key },
      }),
    );
    expect(viaKey.map((e: { status: string }) => e.status)).toEqual(['queued', 'sent']);
  });
});
