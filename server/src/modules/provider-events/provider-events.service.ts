import { and, eq, inArray } from 'drizzle-orm';
import type { Database, Executor } from '../../db/client.ts';
import { emailLogs } from '../../db/schema/index.ts';
import { AppError } from '../../http/errors.ts';
import type { AdapterType } from '../adapters/index.ts';
import { type EmailRef, type StatusEvent, transitionMany } from '../emails/index.ts';
import { addSuppression } from '../suppressions/index.ts';
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

/** Adds `address` to the team's suppression list unless it is there already (in a savepoint). */
async function suppress(tx: Executor, teamId: string, address: string, reason: string): Promise<void> {
  try {
    await tx.transaction((savepoint) => addSuppression(savepoint, teamId, { address, reason }));
  } catch (error) {
    if (error instanceof AppError && error.code === 'ALREADY_EXISTS') return;
    throw error;
  }
}

/**
 * Records `events` reported by the provider of `adapter` (issue #11 "Provider events in"), in one
 * transaction:
 * - each event is matched to an email by `providerMessageId` (any of `event.messageIds`) among the
 *   emails of the adapter's TEAM only; events of unknown messages are ignored;
 * - the matched ones go through THE status writer (`transitionMany`): the history always gets the
 *   event (`detail.source = provider:<type>`); the status moves only forward, each timestamp is
 *   set once, so a duplicate or a late event (delivered after opened) changes nothing else;
 *   a hard bounce sets `errorMessage` to the provider's diagnostic; soft bounces and deferrals
 *   are history only;
 * - a hard bounce or a complaint adds the addresses it names (else the email's `to`) to the
 *   team's suppression list (reason `hard_bounce` / `complaint`), once.
 * @returns counts of events received and matched.
 */
export async function applyProviderEvents(
  db: Database,
  adapter: { id: string; teamId: string; type: string },
  events: readonly ProviderEvent[],
): Promise<AppliedEvents> {
  if (events.length === 0) return { received: 0, matched: 0 };
  const ids = [...new Set(events.flatMap((event) => event.messageIds))];
  return db.transaction(async (tx) => {
    const logs = await findByProviderMessageIds(tx, adapter.teamId, ids);
    const byMessageId = new Map(logs.map((log) => [log.providerMessageId!, log]));
    const source = `provider:${adapter.type}`;
    const items: { email: EmailRef; event: StatusEvent }[] = [];
    const suppressions: { address: string; reason: string }[] = [];
    for (const event of events) {
      const log = event.messageIds.map((id) => byMessageId.get(id)).find((row) => row !== undefined);
      if (!log) continue;
      items.push({ email: { id: log.id, teamId: log.teamId }, event: statusEventOf(event, source) });
      if (event.kind === 'bounced' || event.kind === 'spam') {
        const reason = event.kind === 'bounced' ? 'hard_bounce' : 'complaint';
        const addresses = event.recipients.length ? event.recipients : log.toAddresses;
        for (const address of addresses) suppressions.push({ address, reason });
      }
    }
    // Oldest first, so that one request's events reach the state machine in the order they happened.
    items.sort((a, b) => (a.event.at?.getTime() ?? 0) - (b.event.at?.getTime() ?? 0));
    await transitionMany(tx, items);
    for (const { address, reason } of suppressions) await suppress(tx, adapter.teamId, address, reason);
    return { received: events.length, matched: items.length };
  });
}

async function findByProviderMessageIds(db: Executor, teamId: string, ids: string[]) {
  return db
    .select({
      id: emailLogs.id,
      teamId: emailLogs.teamId,
      providerMessageId: emailLogs.providerMessageId,
      toAddresses: emailLogs.toAddresses,
    })
    .from(emailLogs)
    .where(and(eq(emailLogs.teamId, teamId), inArray(emailLogs.providerMessageId, ids)));
}
