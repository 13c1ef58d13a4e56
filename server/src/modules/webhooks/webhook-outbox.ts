import { sql } from 'drizzle-orm';
import type { Executor } from '../../db/client.ts';
import { webhookOutbox } from '../../db/schema/index.ts';
import { newId } from '../../ids.ts';
import {
  callerFieldsOf,
  type EmailStatus,
  onStatusChange,
  type StatusChangedEmail,
  type StatusChangeListener,
} from '../emails/index.ts';
import { eventPayload } from './webhook-events.ts';
import { webhookRepository } from './webhooks.repository.ts';

/** Called after each outbox write of this process (the dispatcher's nudge; before the commit). */
const outboxListeners = new Set<() => void>();

/**
 * Calls `listener` whenever this process writes outbox rows — inside the writing transaction, so
 * possibly before they are visible (the dispatcher polls briefly after a nudge).
 * @returns a function that removes the listener.
 */
export function onOutboxWrite(listener: () => void): () => void {
  outboxListeners.add(listener);
  return () => outboxListeners.delete(listener);
}

/**
 * The webhook outbox (issue #11): for each email whose status changed in `tx`, one
 * `webhook_outbox` row per active webhook of its team subscribed to `email.<status>`, inserted in
 * `tx` (one query for the subscribers, one multi-row insert for the rows) with the event's body as
 * the JSON text every attempt sends. A status change that commits always has its deliveries
 * queued; one that rolls back has none. Its `idleWhen` gives the SQL condition "no such webhook"
 * (the worker's one-statement recording, issue #9).
 */
export function createWebhookOutbox(): StatusChangeListener {
  const outbox = async (tx: Executor, emails: readonly StatusChangedEmail[]) => {
    const teamIds = [...new Set(emails.map((email) => email.teamId))];
    const statusEvents = [...new Set(emails.map((email) => `email.${email.status}`))];
    const subscribers = await webhookRepository.activeSubscribers(tx, teamIds, statusEvents);
    if (subscribers.length === 0) return;
    const now = new Date();
    const subscribed = (email: StatusChangedEmail) =>
      subscribers.some(
        (webhook) => webhook.teamId === email.teamId && webhook.events.includes(`email.${email.status}`),
      );
    // The sends' metadata and tags ride in the payloads (issue #11), read for subscribed emails only.
    const callerFields = await callerFieldsOf(tx, emails.filter(subscribed));
    const webhookIds: string[] = [];
    const rowTeamIds: string[] = [];
    const messageIds: string[] = [];
    const events: string[] = [];
    const bodies: string[] = [];
    for (const email of emails) {
      const event = `email.${email.status}`;
      let body: string | undefined;
      for (const webhook of subscribers) {
        if (webhook.teamId !== email.teamId || !webhook.events.includes(event)) continue;
        body ??= JSON.stringify(
          eventPayload({ ...email, ...callerFields.get(email.id) }, email.updatedAt ?? now),
        );
        webhookIds.push(webhook.id);
        rowTeamIds.push(webhook.teamId);
        messageIds.push(newId('webhookMessage'));
        events.push(event);
        bodies.push(body);
      }
    }
    if (webhookIds.length === 0) return;
    await tx.execute(sql`insert into ${webhookOutbox} (webhook_id, team_id, message_id, event, body)
      select * from unnest(${sql.param(webhookIds)}::text[], ${sql.param(rowTeamIds)}::text[],
        ${sql.param(messageIds)}::text[], ${sql.param(events)}::text[], ${sql.param(bodies)}::text[])`);
    for (const listener of outboxListeners) listener();
  };
  // Nothing to enqueue exactly when no active webhook of these teams subscribes to these events
  // (the same rows activeSubscribers and the filter above would find).
  return Object.assign(outbox, {
    idleWhen: (teamIds: readonly string[], statuses: readonly EmailStatus[]) =>
      webhookRepository.noActiveSubscriber(
        teamIds,
        statuses.map((status) => `email.${status}`),
      ),
  });
}

/**
 * Makes every status change of this process fan out to webhooks through the outbox (the
 * composition root calls it in API and worker processes alike: both change statuses).
 */
export function installWebhookOutbox(): void {
  onStatusChange(createWebhookOutbox());
}
