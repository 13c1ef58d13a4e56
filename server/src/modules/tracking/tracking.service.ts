import { and, eq, inArray, sql } from 'drizzle-orm';
import type { Database } from '../../db/client.ts';
import { emailEvents, emailLogs } from '../../db/schema/index.ts';
import type { TrackingClaim } from '../../tracking/tokens.ts';
import { type StatusEvent, transitionMany } from '../emails/index.ts';

/**
 * Records one counted tracking hit (issue #11) through the one status writer (`transitionMany`,
 * emails.status.service.ts), with `detail.source = "tracking"`:
 * - an open: `opened` (history once per email; `openedAt` set once by the state machine);
 * - a click: `clicked` with `detail.url` (history once per email and URL), preceded by `opened`
 *   when no tracked open was recorded yet (a click implies an open, so `openedAt` is set too).
 * A repeated hit of the same token appends nothing: under the email row's lock the tracked events
 * already in its history are read first. An email that does not exist (deleted) is ignored; the
 * status only moves forward (a `bounced` or `spam` email keeps its status, the hit is history).
 * `at` is when the hit happened (default now).
 * @throws database errors (the route swallows them: the pixel and redirect never fail).
 */
export async function recordTrackingHit(db: Database, claim: TrackingClaim, at = new Date()): Promise<void> {
  await db.transaction(async (tx) => {
    const [log] = await tx
      .select({ id: emailLogs.id })
      .from(emailLogs)
      .where(and(eq(emailLogs.id, claim.emailId), eq(emailLogs.teamId, claim.teamId)))
      .for('update');
    if (!log) return;
    const seen = await tx
      .select({ status: emailEvents.status, url: sql<string | null>`${emailEvents.detail}->>'url'` })
      .from(emailEvents)
      .where(
        and(
          eq(emailEvents.emailId, claim.emailId),
          inArray(emailEvents.status, ['opened', 'clicked']),
          sql`${emailEvents.detail}->>'source' = 'tracking'`,
        ),
      );
    const email = { id: claim.emailId, teamId: claim.teamId };
    const events: { email: typeof email; event: StatusEvent }[] = [];
    if (!seen.some((event) => event.status === 'opened')) {
      const detail =
        claim.kind === 'click' ? { source: 'tracking', impliedBy: 'click' } : { source: 'tracking' };
      events.push({ email, event: { status: 'opened', at, detail } });
    }
    if (claim.kind === 'click' && !seen.some((e) => e.status === 'clicked' && e.url === claim.url)) {
      events.push({
        email,
        event: { status: 'clicked', at, detail: { source: 'tracking', url: claim.url } },
      });
    }
    if (events.length > 0) await transitionMany(tx, events);
  });
}
