import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { transitionMany } from '../src/modules/emails/index.ts';
import { createTestContext, type TestContext, waitFor } from './helpers/app.ts';
import { setupOwner } from './helpers/auth.ts';
import { dashboardCall, dataOf, expectError, send } from './helpers/factories.ts';
import { FAKE_ADAPTER_TYPES, FAKE_CREDENTIALS, type FakeKind } from './helpers/fake-providers.ts';
import { createTeamWithKey, type SendingTeam } from './helpers/sending-team.ts';
import { startTestSmtpServer, type TestSmtpServer } from './helpers/smtp-server.ts';

/**
 * Issue #11 "Outcomes per recipient": an email to several addresses keeps one outcome per
 * recipient. A real SMTP server (smtp-server) that refuses some RCPTs (550 hard, 450 soft) while
 * accepting others gives a `sent` email with the refused ones recorded against their address (the
 * hard one suppressed); provider events (Postmark, SendGrid payloads) naming one recipient are
 * recorded against that address only; the email is `bounced` only when every recipient bounced.
 */

let ctx: TestContext;
let smtp: TestSmtpServer;

beforeAll(async () => {
  ctx = await createTestContext('postgres');
  smtp = await startTestSmtpServer({
    onRcptTo(address, _session, callback) {
      const local = address.address.split('@')[0]!;
      if (local.startsWith('hard')) {
        return callback(Object.assign(new Error('5.1.1 No such user here'), { responseCode: 550 }));
      }
      if (local.startsWith('soft')) {
        return callback(Object.assign(new Error('4.2.1 Mailbox busy, try later'), { responseCode: 450 }));
      }
      callback();
    },
  });
  await ctx.startWorkers();
});

afterAll(async () => {
  await ctx?.close();
  await smtp?.close();
});

interface RecipientView {
  address: string;
  kind: string;
  status: string;
  bounceType: string | null;
  diagnostic: string | null;
  sentAt: string | null;
  deliveredAt: string | null;
  bouncedAt: string | null;
  spamAt: string | null;
  [field: string]: unknown;
}

async function logOf(team: SendingTeam, id: string) {
  return dataOf(await dashboardCall(ctx.app, team.owner, 'GET', `/api/logs/${id}`));
}

async function recipientsOf(team: SendingTeam, id: string): Promise<RecipientView[]> {
  return dataOf(await dashboardCall(ctx.app, team.owner, 'GET', `/api/logs/${id}/recipients`));
}

function byAddress(recipients: RecipientView[]): Record<string, RecipientView> {
  return Object.fromEntries(recipients.map((r) => [r.address, r]));
}

async function suppressed(team: SendingTeam): Promise<string[]> {
  const page = await dataOf(await dashboardCall(ctx.app, team.owner, 'GET', '/api/suppressions'));
  return page.items.map((item: { address: string }) => item.address).sort();
}

async function settled(team: SendingTeam, id: string) {
  return waitFor(async () => {
    const log = await logOf(team, id);
    return log.status === 'queued' ? undefined : log;
  });
}

describe('SMTP: a server that refuses some recipients', () => {
  it('gives a sent email with the refused recipients recorded (550 hard + suppressed, 450 soft)', async () => {
    const team = await createTeamWithKey(ctx.app, { smtpPort: smtp.port });
    const before = smtp.messages.length;
    const { id } = await dataOf(
      await send(ctx.app, team.key, {
        templateId: team.templateId,
        to: ['ok@example.test', 'Hard Case <hard-1@example.test>'],
        cc: 'soft-1@example.test',
        bcc: 'blind@example.test',
        variables: { first_name: 'Ada' },
      }),
      202,
    );
    const log = await settled(team, id);
    expect(log.status).toBe('sent');
    expect(log.errorMessage).toBeNull();
    // The server got the message once, for the recipients it accepted.
    const received = (await smtp.waitForMessages(before + 1)).slice(before);
    expect(received).toHaveLength(1);
    expect(received[0]!.envelopeTo.sort()).toEqual(['blind@example.test', 'ok@example.test']);

    const recipients = byAddress(log.recipients);
    expect(Object.keys(recipients)).toEqual([
      'ok@example.test',
      'hard-1@example.test',
      'soft-1@example.test',
      'blind@example.test',
    ]);
    expect(recipients['ok@example.test']).toMatchObject({
      kind: 'to',
      status: 'sent',
      bounceType: null,
      diagnostic: null,
      sentAt: log.sentAt,
    });
    expect(recipients['blind@example.test']).toMatchObject({
      kind: 'bcc',
      status: 'sent',
      sentAt: log.sentAt,
    });
    expect(recipients['hard-1@example.test']).toMatchObject({
      kind: 'to',
      status: 'bounced',
      bounceType: 'hard',
      diagnostic: '550 5.1.1 mailbox unavailable',
      sentAt: null,
    });
    expect(recipients['hard-1@example.test']!.bouncedAt).toEqual(expect.any(String));
    expect(recipients['soft-1@example.test']).toMatchObject({
      kind: 'cc',
      status: 'bounced',
      bounceType: 'soft',
      diagnostic: '450 4.2.1 mailbox unavailable',
    });
    // The endpoint answers what the log detail shows.
    expect(await recipientsOf(team, id)).toEqual(log.recipients);
    // Only the hard refusal is suppressed.
    expect(await suppressed(team)).toEqual(['hard-1@example.test']);
    const sentEvent = log.events.find((event: { status: string }) => event.status === 'sent');
    expect(sentEvent.detail.refused).toEqual([
      {
        address: 'hard-1@example.test',
        kind: 'to',
        permanent: true,
        diagnostic: '550 5.1.1 mailbox unavailable',
      },
      {
        address: 'soft-1@example.test',
        kind: 'cc',
        permanent: false,
        diagnostic: '450 4.2.1 mailbox unavailable',
      },
    ]);
  });

  it('all recipients refused: failed as before, every recipient failed with the error', async () => {
    const team = await createTeamWithKey(ctx.app, { smtpPort: smtp.port });
    const { id } = await dataOf(
      await send(ctx.app, team.key, {
        templateId: team.templateId,
        to: ['hard-2@example.test', 'hard-3@example.test'],
        variables: { first_name: 'Ada' },
      }),
      202,
    );
    const log = await settled(team, id);
    expect(log.status).toBe('failed');
    expect(log.errorMessage).toMatch(/^SMTP server rejected the message \(permanent\): 550/);
    expect(log.recipients.map((r: RecipientView) => [r.address, r.status, r.diagnostic])).toEqual([
      ['hard-2@example.test', 'failed', log.errorMessage],
      ['hard-3@example.test', 'failed', log.errorMessage],
    ]);
  });
});

/** A team whose emails were handed to a provider adapter of `kind`, and that adapter's eventsUrl path. */
async function providerTeam(kind: FakeKind) {
  const team = await createTeamWithKey(ctx.app);
  const created = await dataOf(
    await dashboardCall(ctx.app, team.owner, 'POST', '/api/adapters', {
      name: kind,
      type: FAKE_ADAPTER_TYPES[kind],
      config: { ...FAKE_CREDENTIALS[kind] },
    }),
    201,
  );
  const adapter = await dataOf(
    await dashboardCall(ctx.app, team.owner, 'GET', `/api/adapters/${created.id}`),
  );
  return {
    ...team,
    providerAdapterId: created.id as string,
    eventsPath: new URL(adapter.eventsUrl).pathname,
  };
}

/**
 * Accepts an email to `fields` (to, cc, bcc) through the team's provider adapter and records it
 * `sent` under `providerMessageId` (events match the emails of the adapter they come to).
 */
async function sentEmail(
  team: SendingTeam & { providerAdapterId: string },
  providerMessageId: string,
  fields: Record<string, unknown>,
) {
  const { id } = await dataOf(
    await send(ctx.app, team.key, {
      templateId: team.templateId,
      variables: { first_name: 'Ada' },
      adapterId: team.providerAdapterId,
      from: 'sender@example.com',
      ...fields,
    }),
    202,
  );
  await ctx.context.db.transaction((tx) =>
    transitionMany(tx, [
      { email: { id, teamId: team.owner.teamId }, event: { status: 'sent', set: { providerMessageId } } },
    ]),
  );
  return id as string;
}

function postEvent(pathname: string, body: unknown) {
  return ctx.app.inject({
    method: 'POST',
    url: pathname,
    headers: { 'content-type': 'application/json' },
    payload: JSON.stringify(body),
  });
}

function postmarkBounce(messageId: string, email: string, at: string) {
  return {
    RecordType: 'Bounce',
    ID: 4323372036,
    Type: 'HardBounce',
    TypeCode: 1,
    Name: 'Hard bounce',
    MessageID: messageId,
    Description: 'The server was unable to deliver your message (ex: unknown user, mailbox not found).',
    Details: `smtp;550 5.1.1 ${email} does not exist.`,
    Email: email,
    BouncedAt: at,
    Inactive: true,
  };
}

describe('provider events name one recipient', () => {
  it('a Postmark hard bounce of one of three recipients is recorded and suppressed for that address only', async () => {
    const team = await providerTeam('postmark');
    const id = await sentEmail(team, 'pm-multi-1', {
      to: ['ann@example.test', 'Bob <bob@example.test>'],
      cc: 'cid@example.test',
    });
    await dataOf(
      await postEvent(
        team.eventsPath,
        postmarkBounce('pm-multi-1', 'bob@example.test', '2026-11-23T12:10:00.000Z'),
      ),
    );
    let log = await logOf(team, id);
    // Two recipients may still have it: the email is not bounced, and not resendable.
    expect(log.status).toBe('sent');
    expect(log.errorMessage).toBeNull();
    expect(log.bouncedAt).toBeNull();
    let recipients = byAddress(log.recipients);
    expect(recipients['bob@example.test']).toMatchObject({
      kind: 'to',
      status: 'bounced',
      bounceType: 'hard',
      diagnostic: 'smtp;550 5.1.1 bob@example.test does not exist.',
      bouncedAt: '2026-11-23T12:10:00.000Z',
      sentAt: log.sentAt,
    });
    expect(recipients['ann@example.test']).toMatchObject({ status: 'sent', bounceType: null });
    expect(recipients['cid@example.test']).toMatchObject({ kind: 'cc', status: 'sent', bounceType: null });
    expect(await suppressed(team)).toEqual(['bob@example.test']);
    // The bounce is in the email's history, naming the recipient.
    const history = await dataOf(await dashboardCall(ctx.app, team.owner, 'GET', `/api/logs/${id}/events`));
    expect(history.find((entry: { status: string }) => entry.status === 'bounced')).toMatchObject({
      detail: { recipients: ['bob@example.test'], bounceType: 'hard' },
    });

    // Delivered to Ann: the email is delivered (its furthest recipient), Cid still only sent.
    await dataOf(
      await postEvent(team.eventsPath, {
        RecordType: 'Delivery',
        MessageID: 'pm-multi-1',
        Recipient: 'ann@example.test',
        DeliveredAt: '2026-11-23T12:11:00.000Z',
        Details: 'Test delivery webhook details',
      }),
    );
    log = await logOf(team, id);
    expect(log.status).toBe('delivered');
    recipients = byAddress(log.recipients);
    expect(recipients['ann@example.test']).toMatchObject({
      status: 'delivered',
      deliveredAt: '2026-11-23T12:11:00.000Z',
    });
    expect(recipients['cid@example.test']!.status).toBe('sent');

    // Ann's mailbox bounces it later, then Cid's: now every recipient bounced, so does the email.
    await dataOf(
      await postEvent(
        team.eventsPath,
        postmarkBounce('pm-multi-1', 'ann@example.test', '2026-11-23T12:12:00.000Z'),
      ),
    );
    expect((await logOf(team, id)).status).toBe('delivered');
    await dataOf(
      await postEvent(
        team.eventsPath,
        postmarkBounce('pm-multi-1', 'CID@example.test', '2026-11-23T12:13:00.000Z'),
      ),
    );
    log = await logOf(team, id);
    expect(log.status).toBe('bounced');
    expect(log.bouncedAt).toBe('2026-11-23T12:13:00.000Z');
    expect(log.errorMessage).toBe('smtp;550 5.1.1 CID@example.test does not exist.');
    expect(log.recipients.map((r: RecipientView) => r.status)).toEqual(['bounced', 'bounced', 'bounced']);
    expect(await suppressed(team)).toEqual(['ann@example.test', 'bob@example.test', 'cid@example.test']);
  });

  it('a SendGrid batch: delivered, bounce and spamreport each recorded against its own recipient', async () => {
    const team = await providerTeam('sendgrid');
    const id = await sentEmail(team, 'sg-multi-1', {
      to: 'ann@example.test',
      cc: 'bob@example.test',
      bcc: 'cid@example.test',
    });
    const at = Math.floor(Date.now() / 1000);
    const event = (email: string, name: string, extra: Record<string, unknown> = {}, offset = 0) => ({
      email,
      timestamp: at + offset,
      event: name,
      sg_event_id: `ev-${email}-${name}`,
      sg_message_id: 'sg-multi-1.filterdrecv-5bd6c9f7b-abcde-1-0',
      ...extra,
    });
    await dataOf(
      await postEvent(team.eventsPath, [
        event('ann@example.test', 'delivered', { response: '250 OK' }, 1),
        event(
          'bob@example.test',
          'bounce',
          { type: 'bounce', reason: '550 5.1.1 unknown user', status: '5.1.1' },
          2,
        ),
        event('cid@example.test', 'deferred', { reason: '421 try again later', attempt: '1' }, 3),
        event('cid@example.test', 'spamreport', {}, 4),
      ]),
    );
    const log = await logOf(team, id);
    expect(log.status).toBe('spam');
    const recipients = byAddress(log.recipients);
    expect(recipients['ann@example.test']).toMatchObject({
      kind: 'to',
      status: 'delivered',
      bounceType: null,
    });
    expect(recipients['bob@example.test']).toMatchObject({
      kind: 'cc',
      status: 'bounced',
      bounceType: 'hard',
      diagnostic: '550 5.1.1 unknown user',
    });
    expect(recipients['cid@example.test']).toMatchObject({
      kind: 'bcc',
      status: 'spam',
      diagnostic: '421 try again later',
      deferredAt: new Date((at + 3) * 1000).toISOString(),
      spamAt: new Date((at + 4) * 1000).toISOString(),
    });
    expect(await suppressed(team)).toEqual(['bob@example.test', 'cid@example.test']);
  });

  it('an email with one recipient still ends bounced on its hard bounce (as before)', async () => {
    const team = await providerTeam('postmark');
    const id = await sentEmail(team, 'pm-single-1', { to: 'Solo <solo@example.test>' });
    await dataOf(
      await postEvent(
        team.eventsPath,
        postmarkBounce('pm-single-1', 'solo@example.test', '2026-11-23T12:20:00.000Z'),
      ),
    );
    const log = await logOf(team, id);
    expect(log.status).toBe('bounced');
    expect(log.recipients).toEqual([
      expect.objectContaining({ address: 'solo@example.test', status: 'bounced', bounceType: 'hard' }),
    ]);
    expect(await suppressed(team)).toEqual(['solo@example.test']);
  });
});

describe('provider events that cannot name one recipient', () => {
  it('a Resend bounce of a two-recipient email applies to the email and suppresses no one', async () => {
    const team = await providerTeam('resend');
    const resendBounce = (emailId: string, to: string[]) => ({
      type: 'email.bounced',
      created_at: new Date().toISOString(),
      data: {
        created_at: new Date().toISOString(),
        email_id: emailId,
        from: 'Acme <onboarding@resend.dev>',
        to,
        subject: 'Hi Ada',
        bounce: { type: 'Permanent', subType: 'General', message: 'The recipient rejected the email.' },
      },
    });
    // Resend's `data.to` is the whole `to` list: it does not say which one bounced.
    const both = await sentEmail(team, 're-multi-1', { to: ['ann@example.test', 'bob@example.test'] });
    await dataOf(
      await postEvent(team.eventsPath, resendBounce('re-multi-1', ['ann@example.test', 'bob@example.test'])),
    );
    const log = await logOf(team, both);
    expect(log.status).toBe('bounced');
    expect(log.recipients.map((r: RecipientView) => [r.address, r.status, r.bounceType])).toEqual([
      ['ann@example.test', 'bounced', 'hard'],
      ['bob@example.test', 'bounced', 'hard'],
    ]);
    expect(await suppressed(team)).toEqual([]);
    // One `to` and a cc: `data.to` names the `to` address, but the bounce may be the cc'd one's
    // (before: ada was suppressed and marked bounced for it, and the cc'd address stayed `sent`).
    const withCc = await sentEmail(team, 're-cc-1', { to: 'ada@example.test', cc: ['dan@example.test'] });
    await dataOf(await postEvent(team.eventsPath, resendBounce('re-cc-1', ['ada@example.test'])));
    expect(await suppressed(team)).toEqual([]);
    expect((await logOf(team, withCc)).status).toBe('bounced');
    // With one recipient, it is that recipient's bounce.
    await sentEmail(team, 're-single-1', { to: 'cid@example.test' });
    await dataOf(await postEvent(team.eventsPath, resendBounce('re-single-1', ['cid@example.test'])));
    expect(await suppressed(team)).toEqual(['cid@example.test']);
  });
});

describe('GET /api/logs/:id/recipients', () => {
  it("is the team's own: another team's email is 404 NOT_FOUND, a queued email lists queued recipients", async () => {
    const team = await createTeamWithKey(ctx.app);
    const { id } = await dataOf(
      await send(ctx.app, team.key, {
        templateId: team.templateId,
        to: 'ann@example.test',
        cc: ['bob@example.test', 'ANN@example.test'],
        variables: { first_name: 'Ada' },
        scheduledAt: new Date(Date.now() + 3_600_000).toISOString(),
      }),
      202,
    );
    // Each address once (the first kind it was given under).
    expect((await recipientsOf(team, id)).map((r) => [r.address, r.kind, r.status, r.sentAt])).toEqual([
      ['ann@example.test', 'to', 'queued', null],
      ['bob@example.test', 'cc', 'queued', null],
    ]);
    const stranger = await setupOwner(ctx.app);
    expectError(
      await dashboardCall(ctx.app, stranger, 'GET', `/api/logs/${id}/recipients`),
      404,
      'NOT_FOUND',
    );
    expectError(await dashboardCall(ctx.app, stranger, 'GET', `/api/logs/${id}`), 404, 'NOT_FOUND');
  });
});
