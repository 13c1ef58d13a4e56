import { and, eq, sql } from 'drizzle-orm';
import type { Database, Executor } from '../../db/client.ts';
import { emailLogs } from '../../db/schema/index.ts';
import type { AdapterType } from '../adapters/index.ts';
import {
  type EmailRef,
  type RecipientEvent,
  RecipientTracker,
  type StatusEvent,
  transitionMany,
} from '../emails/index.ts';
import { addSuppressions } from '../suppressions/index.ts';
import { parseMailgunEvents } from './mailgun.events.ts';
import { parsePostmarkEvents } from './postmark.events.ts';
import type { ProviderEvent, ProviderEventParser } from './provider-event.ts';
import { parseResendEvents } from './resend.events.ts';
import { parseSendGridEvents } from './sendgrid.events.ts';
import { parseSesEvents } from './ses.events.ts';

/** The events parser of each adapter type that posts events (SMTP servers post none). */
export const PROVIDER_EVENT_PARSERS: Partial<Record<AdapterType, ProviderEventParser>> = {
  mailapi_a: parseResendEvents,
  mailapi_b: parseSendGridEvents,
  mailapi_domain: parseMailgunEvents,
  mailapi_cloud: parseSesEvents,
  mailapi_server: parsePostmarkEvents,
};

/** The events parser of adapters of `type`, or undefined when they post no events (own keys only). */
export function providerEventParserOf(type: string): ProviderEventParser | undefined {
  return Object.hasOwn(PROVIDER_EVENT_PARSERS, type)
    ? PROVIDER_EVENT_PARSERS[type as keyof typeof PROVIDER_EVENT_PARSERS]
    : undefined;
}

/** What one request's events did. */
export interface AppliedEvents {
  /** Events in the request (that the service records; a provider's `processed` etc. are not counted). */
  received: number;
  /** Events whose message is one of the team's emails (the rest are acknowledged and ignored). */
  matched: number;
}

/** The status event recorded for a provider event (ARCHITECTURE.md state machine does the rest). */
function statusEventOf(event: ProviderEvent, source: string): StatusEvent {
  const detail: Record<string, unknown> = {
    source,
    event: event.providerEvent,
    ...(event.recipients.length ? { recipients: event.recipients } : {}),
    ...(event.diagnostic ? { diagnostic: event.diagnostic } : {}),
    ...(event.url ? { url: event.url } : {}),
  };
  switch (event.kind) {
    case 'bounced':
      return {
        status: 'bounced',
        at: event.at,
        detail: { ...detail, bounceType: 'hard' },
        set: { errorMessage: event.diagnostic ?? 'Bounced' },
      };
    case 'soft_bounce':
    case 'deferral':
      // Temporary: the provider keeps trying, so the email does not end here (history only).
      return {
        status: 'bounced',
        at: event.at,
        historyOnly: true,
        detail: { ...detail, bounceType: event.kind === 'deferral' ? 'deferral' : 'soft' },
      };
    case 'failed':
      return { status: 'failed', at: event.at, detail, set: { errorMessage: event.diagnostic ?? 'Failed' } };
    default:
      return { status: event.kind, at: event.at, detail };
  }
}

/**
 * Records `events` reported by the provider of `adapter` (issue #11 "Provider events in" and
 * "Outcomes per recipient"), in one transaction:
 * - each event is matched to an email by `providerMessageId` (any of `event.messageIds`) among the
 *   emails THIS adapter delivered, in its team (their rows locked for the transaction); events of
 *   unknown messages are ignored; repeats (same email, kind and recipients) count once;
 * - an event naming recipients of the email is recorded against those recipients
 *   (`email_recipients`, emails/email-recipients.ts): their status, bounce type, diagnostic and
 *   timestamps; the other recipients are untouched;
 * - the email's status (THE status writer, `transitionMany`): the history always gets the event
 *   (`detail.source = provider:<type>`); the status moves only forward, each timestamp is set once,
 *   so a duplicate or a late event (delivered after opened) changes nothing else. A hard bounce (or
 *   a `failed`) of some recipients is history only: the email ends `bounced` (errorMessage = the
 *   provider's diagnostic) only when every one of its recipients bounced or failed; an event that
 *   names no recipient of the email applies to the whole email as before. Soft bounces and
 *   deferrals are history only;
 * - a hard bounce or a complaint adds the recipients of the email it names to the team's
 *   suppression list (reason `hard_bounce` / `complaint`), once — never the email's other
 *   recipients, nor addresses the email did not go to; one that names none suppresses the email's
 *   recipient when it has exactly one.
 * @returns counts of events received and matched.
 */
export async function applyProviderEvents(
  db: Database,
  adapter: { id: string; teamId: string; type: string },
  events: readonly ProviderEvent[],
): Promise<AppliedEvents> {
  if (events.length === 0) return { received: 0, matched: 0 };
  const stored = events.map(storable);
  const ids = [...new Set(stored.flatMap((event) => event.messageIds))];
  return db.transaction(async (tx) => {
    const logs = await findByProviderMessageIds(tx, adapter, ids);
    const byMessageId = new Map(logs.map((log) => [log.providerMessageId!, log]));
    const source = `provider:${adapter.type}`;
    const matched = stored.flatMap((event) => {
      const log = event.messageIds.map((id) => byMessageId.get(id)).find((row) => row !== undefined);
      return log ? [{ event, log }] : [];
    });
    // Oldest first, so that one request's events reach the state machine in the order they happened.
    matched.sort((a, b) => a.event.at.getTime() - b.event.at.getTime());
    const tracker = await RecipientTracker.load(tx, adapter.teamId, [
      ...new Set(matched.map(({ log }) => log)),
    ]);
    // A repeat of an event changes nothing but the history: an event is kept only when it names a
    // recipient of the email that no earlier one of its kind named, or names none and is the first
    // of its kind to name none (so at most recipients + 1 per email and kind). One request of 5 MB naming one
    // message thousands of times held its row lock and a connection for two minutes, a status round
    // per event (review finding, session 13); naming a different made-up address each time did the
    // same while the key was the named addresses themselves (review finding, session 17).
    const seen = new Set<string>();
    const firsts = matched.filter(({ event, log }) => {
      const named = tracker.recipientKeysAmong(log.id, event.recipients);
      const keys =
        named.length > 0 ? named.map((key) => `${log.id} ${event.kind} ${key}`) : [`${log.id} ${event.kind}`];
      const fresh = keys.filter((key) => !seen.has(key));
      for (const key of fresh) seen.add(key);
      return fresh.length > 0;
    });
    const items: { email: EmailRef; event: StatusEvent }[] = [];
    const suppressions: { teamId: string; address: string; reason: string }[] = [];
    for (const { event, log } of firsts) {
      const statusEvent = statusEventOf(event, source);
      const { applied, allUndelivered } = event.recipients.length
        ? tracker.apply(log.id, event.recipients, recipientEventOf(event))
        : { applied: [], allUndelivered: false };
      // A bounce (or drop) of some recipients only: the email reached, or may reach, the others.
      if (applied.length > 0 && (event.kind === 'bounced' || event.kind === 'failed') && !allUndelivered) {
        statusEvent.historyOnly = true;
        delete statusEvent.set;
      }
      if (applied.length > 0) statusEvent.recipients = applied;
      items.push({ email: { id: log.id, teamId: log.teamId }, event: statusEvent });
      if (event.kind === 'bounced' || event.kind === 'spam') {
        const reason = event.kind === 'bounced' ? 'hard_bounce' : 'complaint';
        // Only recipients of the email: an address the event names that the email was not sent to
        // is not suppressed (review finding, session 13: any address could be put on the team's
        // list, and one of 6 KB failed the index with a 500, losing the batch's other events). An
        // event that names no address is pinned on the email's recipient only when it has one.
        const only = tracker.recipientsOf(log.id);
        const addresses =
          applied.length > 0
            ? applied
            : event.recipients.length === 0 && only.length === 1
              ? [only[0]!.address]
              : [];
        for (const address of addresses) suppressions.push({ teamId: adapter.teamId, address, reason });
      }
    }
    await tracker.flush(tx);
    await transitionMany(tx, items);
    await addSuppressions(tx, suppressions);
    return { received: events.length, matched: matched.length };
  });
}

/**
 * `event` with every string storable by PostgreSQL: NUL and lone surrogates (which text and jsonb
 * refuse) become U+FFFD. One such character in one event failed the whole request with 400, and
 * the provider, sending the same batch again, lost its other events for good (review finding,
 * session 17).
 */
function storable(event: ProviderEvent): ProviderEvent {
  const text = (value: string) => value.toWellFormed().replaceAll('\0', '\uFFFD');
  return {
    ...event,
    messageIds: event.messageIds.map(text),
    recipients: event.recipients.map(text),
    providerEvent: text(event.providerEvent),
    ...(event.diagnostic !== undefined ? { diagnostic: text(event.diagnostic) } : {}),
    ...(event.url !== undefined ? { url: text(event.url) } : {}),
  };
}

/** The recipient-level event of a provider event (the same kinds, time and diagnostic). */
function recipientEventOf(event: ProviderEvent): RecipientEvent {
  return { kind: event.kind, at: event.at, diagnostic: event.diagnostic };
}

/**
 * The emails `adapter` delivered (the log's adapter is the one that delivered, fallback included)
 * stored under any of `ids` as providerMessageId, locked for update, by id. Not every email of the
 * team: an events URL of one adapter (perhaps one without a signing secret) must not move emails
 * another adapter of the team delivered, whose own events are signed (review finding, session 13).
 * The ids travel as ONE array parameter: a batch (5 MB) may name more ids than PostgreSQL's 65,535
 * bound parameters.
 */
async function findByProviderMessageIds(
  db: Executor,
  adapter: { id: string; teamId: string },
  ids: string[],
) {
  return (
    db
      .select({
        id: emailLogs.id,
        teamId: emailLogs.teamId,
        providerMessageId: emailLogs.providerMessageId,
        toAddresses: emailLogs.toAddresses,
        status: emailLogs.status,
        errorMessage: emailLogs.errorMessage,
        sentAt: emailLogs.sentAt,
        deliveredAt: emailLogs.deliveredAt,
        openedAt: emailLogs.openedAt,
        clickedAt: emailLogs.clickedAt,
        bouncedAt: emailLogs.bouncedAt,
        failedAt: emailLogs.failedAt,
        spamAt: emailLogs.spamAt,
      })
      .from(emailLogs)
      .where(
        and(
          eq(emailLogs.teamId, adapter.teamId),
          eq(emailLogs.adapterId, adapter.id),
          sql`${emailLogs.providerMessageId} = any(${sql.param(ids)}::text[])`,
        ),
      )
      // Serialises requests about the same emails (their recipients are read, changed and written),
      // locking in id order so that two requests about the same emails cannot deadlock.
      .orderBy(emailLogs.id)
      .for('update')
  );
}
