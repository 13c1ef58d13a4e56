import type { Executor } from '../../db/client.ts';
import { newId, newJobId } from '../../ids.ts';
import { type JobPayload, WEBHOOK_DELIVER_JOB } from '../../jobs/definitions.ts';
import type { JobQueue } from '../../jobs/queue.ts';
import {
  callerFieldsOf,
  type EmailStatus,
  onStatusChange,
  type StatusChangedEmail,
  type StatusChangeListener,
} from '../emails/index.ts';
import { eventPayload } from './webhook-events.ts';
import { COMPLETED_JOB_RETENTION_SECONDS } from './webhook-recorder.ts';
import { webhookRepository } from './webhooks.repository.ts';

/**
 * The webhook outbox (issue #11): for each email whose status changed in `tx`, one
 * `webhook.deliver` job per active webhook of its team subscribed to `email.<status>`, inserted in
 * `tx` (one query for the subscribers, one multi-row insert for the jobs). A status change that
 * commits always has its deliveries queued; one that rolls back has none. Its `idleWhen` gives the
 * SQL condition "no such webhook" (the worker's one-statement recording, issue #9).
 */
export function createWebhookOutbox(queue: JobQueue): StatusChangeListener {
  const outbox = async (tx: Executor, emails: readonly StatusChangedEmail[]) => {
    const teamIds = [...new Set(emails.map((email) => email.teamId))];
    const subscribers = await webhookRepository.activeSubscribers(tx, teamIds);
    if (subscribers.length === 0) return;
    const now = new Date();
    const subscribed = (email: StatusChangedEmail) =>
      subscribers.some(
        (webhook) => webhook.teamId === email.teamId && webhook.events.includes(`email.${email.status}`),
      );
    // The sends' metadata and tags ride in the payloads (issue #11), read for subscribed emails only.
    const callerFields = await callerFieldsOf(tx, emails.filter(subscribed));
    const jobs: { id: string; data: JobPayload<'webhook.deliver'>; deleteAfterSeconds: number }[] = [];
    for (const email of emails) {
      const event = `email.${email.status}`;
      let payload: Record<string, unknown> | undefined;
      for (const webhook of subscribers) {
        if (webhook.teamId !== email.teamId || !webhook.events.includes(event)) continue;
        payload ??= eventPayload({ ...email, ...callerFields.get(email.id) }, email.updatedAt ?? now);
        jobs.push({
          id: newJobId().uuid,
          data: {
            webhookId: webhook.id,
            teamId: webhook.teamId,
            messageId: newId('webhookMessage'),
            event,
            payload,
            attempt: 1,
          },
          deleteAfterSeconds: COMPLETED_JOB_RETENTION_SECONDS,
        });
      }
    }
    await queue.enqueueMany(tx, WEBHOOK_DELIVER_JOB, jobs);
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
 * Makes every status change of this process fan out to webhooks through `queue` (the composition
 * root calls it in API and worker processes alike: both change statuses).
 */
export function installWebhookOutbox(queue: JobQueue): void {
  onStatusChange(createWebhookOutbox(queue));
}
