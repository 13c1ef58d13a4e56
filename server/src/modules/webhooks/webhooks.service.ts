import { isIP } from 'node:net';
import type { Config } from '../../config.ts';
import type { Database } from '../../db/client.ts';
import { isoOrNull } from '../../http/envelope.ts';
import { AppError, notFound, validationError } from '../../http/errors.ts';
import { newId } from '../../ids.ts';
import { ConfigDecryptionError } from '../adapters/index.ts';
import { type AttemptOutcome, attemptDelivery } from './webhook-attempt.ts';
import { webhookClientFor } from './webhook-client.ts';
import { httpsRequired, resolveWebhookHost, webhookUrlProblem } from './webhook-destination.ts';
import { sampleEventPayload, type WebhookEvent } from './webhook-events.ts';
import { writeAttempts } from './webhook-recorder.ts';
import { decryptWebhookSecret, encryptWebhookSecret } from './webhook-secret-store.ts';
import { generateWebhookSecret } from './webhook-signature.ts';
import {
  type WebhookChanges,
  type WebhookDeliveryRow,
  type WebhookRow,
  webhookRepository,
} from './webhooks.repository.ts';
import type {
  CreateWebhookInput,
  DeliveryView,
  ListDeliveriesQuery,
  UpdateWebhookInput,
  WebhookView,
} from './webhooks.schema.ts';

/** What the webhook service needs from the process. */
export interface WebhookServiceDeps {
  db: Database;
  config: Pick<Config, 'WEBHOOKS_ALLOW_PRIVATE' | 'WEBHOOK_TIMEOUT_SECONDS'>;
  /** ENCRYPTION_KEY (32 bytes): secrets are stored encrypted with it. */
  encryptionKey: Buffer;
}

/** How long a rotated-out secret keeps signing beside the new one (issue #11: 24 h). */
export const PREVIOUS_SECRET_OVERLAP_MS = 24 * 60 * 60 * 1000;

function toView(row: WebhookRow): WebhookView {
  return {
    id: row.id,
    name: row.name,
    url: row.url,
    events: row.events,
    isActive: row.isActive,
    disabledReason: row.disabledReason,
    lastTriggeredAt: isoOrNull(row.lastTriggeredAt),
    lastSuccessAt: isoOrNull(row.lastSuccessAt),
    consecutiveFailures: row.consecutiveFailures,
    createdAt: row.createdAt.toISOString(),
    updatedAt: row.updatedAt.toISOString(),
  };
}

function toDeliveryView(row: Omit<WebhookDeliveryRow, 'teamId'>): DeliveryView {
  return {
    id: row.id,
    webhookId: row.webhookId,
    messageId: row.messageId,
    event: row.event,
    payload: isPayload(row.payload) ? row.payload : null,
    responseStatus: row.responseStatus,
    responseBody: row.responseBody,
    success: row.success,
    attemptCount: row.attemptCount,
    durationMs: row.durationMs,
    error: row.error,
    createdAt: row.createdAt.toISOString(),
  };
}

/**
 * Checks a webhook URL when it is saved: what {@link webhookUrlProblem} refuses (absolute http(s)
 * without credentials, https under NODE_ENV=production per spec "Webhook", a port and host a
 * connection can be made to), and an IP-literal host must pass the outbound policy (a name is
 * checked on every request instead, where its current DNS answer counts).
 * @throws VALIDATION_ERROR (400) with details.issues [{path: 'body.url', message}].
 */
async function checkUrl(url: string, config: WebhookServiceDeps['config']): Promise<void> {
  const problem = webhookUrlProblem(url, httpsRequired());
  if (problem) throw validationError([{ path: 'body.url', message: problem }]);
  const host = new URL(url).hostname.replace(/^\[|\]$/g, '');
  if (!isIP(host)) return;
  try {
    await resolveWebhookHost(host, { allowPrivate: config.WEBHOOKS_ALLOW_PRIVATE });
  } catch (error) {
    throw validationError([{ path: 'body.url', message: (error as Error).message }]);
  }
}

async function findOrThrow(db: Database, teamId: string, id: string): Promise<WebhookRow> {
  const row = await webhookRepository.find(db, teamId, id);
  if (!row) throw notFound('Webhook');
  return row;
}

/** `GET /api/webhooks`: the team's webhooks, newest first (spec "Webhooks (session)"). */
export async function listWebhooks(db: Database, teamId: string): Promise<WebhookView[]> {
  return (await webhookRepository.list(db, teamId)).map(toView);
}

/** `GET /api/webhooks/:id`. @throws NOT_FOUND (404) for another team's or an unknown id. */
export async function getWebhook(db: Database, teamId: string, id: string): Promise<WebhookView> {
  return toView(await findOrThrow(db, teamId, id));
}

/**
 * Webhooks a team may have, active or not. Every status change of an email writes one delivery per
 * matching webhook in its own transaction, so without a bound one team could make each of its
 * sends write thousands of rows and attempts on the shared worker and database. Hosted services
 * bound it too (Stripe 16 endpoints, Postmark 10 webhooks per server, SendGrid 5 Event Webhooks).
 */
export const WEBHOOKS_PER_TEAM = 20;

/**
 * `POST /api/webhooks`: creates an active webhook with a new `whsec_` secret, stored encrypted and
 * returned in full only here (and by rotate-secret).
 * @throws VALIDATION_ERROR (400) for a URL {@link checkUrl} refuses; CONFLICT (409) with
 *   `details.limit` when the team already has {@link WEBHOOKS_PER_TEAM} webhooks.
 */
export async function createWebhook(
  deps: WebhookServiceDeps,
  teamId: string,
  input: CreateWebhookInput,
): Promise<WebhookView & { secret: string }> {
  await checkUrl(input.url, deps.config);
  const id = newId('webhook');
  const secret = generateWebhookSecret();
  const row = await webhookRepository.insertWithinLimit(
    deps.db,
    {
      id,
      teamId,
      name: input.name,
      url: input.url,
      events: input.events,
      secretEncrypted: encryptWebhookSecret(deps.encryptionKey, secret, teamId, id),
    },
    WEBHOOKS_PER_TEAM,
  );
  if (!row) {
    throw new AppError(
      'CONFLICT',
      `A team can have at most ${WEBHOOKS_PER_TEAM} webhooks; delete one first`,
      {
        limit: WEBHOOKS_PER_TEAM,
      },
    );
  }
  return { ...toView(row), secret };
}

/**
 * `PUT /api/webhooks/:id`: name, url, events, isActive. Re-enabling (isActive true) clears the
 * reason and failure streak of an automatic disabling, so the 5-day clock starts again.
 * @throws NOT_FOUND (404); VALIDATION_ERROR (400) for a refused URL.
 */
export async function updateWebhook(
  deps: WebhookServiceDeps,
  teamId: string,
  id: string,
  input: UpdateWebhookInput,
): Promise<WebhookView> {
  const current = await findOrThrow(deps.db, teamId, id);
  if (input.url !== undefined) await checkUrl(input.url, deps.config);
  const changes: WebhookChanges = {};
  if (input.name !== undefined) changes.name = input.name;
  if (input.url !== undefined) changes.url = input.url;
  if (input.events !== undefined) changes.events = input.events;
  if (input.isActive !== undefined) {
    changes.isActive = input.isActive;
    if (input.isActive && !current.isActive) {
      Object.assign(changes, { disabledReason: null, consecutiveFailures: 0, failingSince: null });
    }
  }
  const row = await webhookRepository.update(deps.db, teamId, id, changes);
  if (!row) throw notFound('Webhook');
  return toView(row);
}

/** `DELETE /api/webhooks/:id` (its delivery records go with it). @throws NOT_FOUND (404). */
export async function deleteWebhook(db: Database, teamId: string, id: string): Promise<void> {
  if (!(await webhookRepository.delete(db, teamId, id))) throw notFound('Webhook');
}

/**
 * `POST /api/webhooks/:id/rotate-secret` (issue #11): a new secret signs from now on; the current
 * one keeps signing beside it for 24 h (one more `v1,` signature in `webhook-signature`), so
 * receivers can switch without losing a delivery. Rotated again within those 24 h, every secret
 * rotated out keeps its own 24 h (webhookRepository.rotateSecret: one statement, so two rotations
 * at once both hold). Secrets that no longer decrypt (ENCRYPTION_KEY changed since they were
 * written) are dropped instead of kept: rotating is the fix for a changed key, and kept, they
 * could not sign for those 24 h (review finding, integrity 2).
 * @returns the new secret (shown only here) and when the one it replaced stops signing.
 * @throws NOT_FOUND (404).
 */
export async function rotateWebhookSecret(
  deps: WebhookServiceDeps,
  teamId: string,
  id: string,
): Promise<{ id: string; secret: string; previousSecretExpiresAt: string }> {
  const current = await webhookRepository.find(deps.db, teamId, id);
  if (!current) throw notFound('Webhook');
  const secret = generateWebhookSecret();
  const expiresAt = new Date(Date.now() + PREVIOUS_SECRET_OVERLAP_MS);
  const row = await webhookRepository.rotateSecret(
    deps.db,
    teamId,
    id,
    encryptWebhookSecret(deps.encryptionKey, secret, teamId, id),
    expiresAt,
    unreadableSecretsOf(deps.encryptionKey, current),
  );
  if (!row) throw notFound('Webhook');
  return { id, secret, previousSecretExpiresAt: expiresAt.toISOString() };
}

/** The stored secrets of `row` (current and rotated out) that do not decrypt with `encryptionKey`. */
function unreadableSecretsOf(encryptionKey: Buffer, row: WebhookRow): string[] {
  const stored = [row.secretEncrypted, ...row.previousSecrets.map((previous) => previous.secret)];
  return stored.filter((ciphertext) => {
    try {
      decryptWebhookSecret(encryptionKey, ciphertext, row.teamId, row.id);
      return false;
    } catch (error) {
      if (error instanceof ConfigDecryptionError) return true;
      throw error;
    }
  });
}

/** An event as an attempt's body (its JSON text) and payload (the object, for the record shown). */
function withBody(payload: unknown): { body: string; payload: unknown } {
  return { body: JSON.stringify(payload), payload };
}

/**
 * Records a synchronous attempt (test, redeliver) with the same bookkeeping as the worker's.
 * @throws NOT_FOUND (404) when the webhook (or its team) was deleted while the request was out (up
 *   to WEBHOOK_TIMEOUT_SECONDS): its record has nothing left to belong to.
 */
async function recordNow(deps: WebhookServiceDeps, outcome: AttemptOutcome): Promise<DeliveryView> {
  await writeAttempts(deps.db, [{ outcome }]);
  // The statement writes no record of a webhook deleted meanwhile, and a delete after it takes the
  // record along (migration 0020): either way there is none now.
  const { teamId, webhookId, id } = outcome.delivery;
  if (!(await webhookRepository.findDelivery(deps.db, teamId, webhookId, id))) throw notFound('Webhook');
  return toDeliveryView(outcome.delivery as WebhookDeliveryRow);
}

/**
 * `POST /api/webhooks/:id/test` (issue #11): sends a sample event (the webhook's first subscribed
 * event, about an invented email) now, signed like any delivery, also when the webhook is disabled;
 * the attempt is recorded as a delivery and returned (a failing receiver is a 200 with
 * `success: false`). No retries.
 * @throws NOT_FOUND (404).
 */
export async function testWebhook(
  deps: WebhookServiceDeps,
  teamId: string,
  id: string,
): Promise<DeliveryView> {
  const webhook = await findOrThrow(deps.db, teamId, id);
  const event = (webhook.events[0] ?? 'email.sent') as WebhookEvent;
  const outcome = await attemptDelivery(webhookClientFor(deps.config), deps.encryptionKey, {
    webhook,
    messageId: newId('webhookMessage'),
    event,
    ...withBody(sampleEventPayload(event, new Date())),
    attempt: 1,
  });
  return recordNow(deps, outcome);
}

/** True when a stored delivery payload is an event object (the only kind a delivery sends). */
function isPayload(payload: unknown): payload is Record<string, unknown> {
  return typeof payload === 'object' && payload !== null && !Array.isArray(payload);
}

/**
 * `POST /api/webhooks/:id/deliveries/:deliveryId/redeliver` (issue #11): sends that delivery's
 * payload again now, with the same `webhook-id` (receivers deduplicate on it) and the next attempt
 * number, and returns the new delivery record. No automatic retries follow it.
 * @throws NOT_FOUND (404) for an unknown webhook, or a delivery not of this webhook;
 *   VALIDATION_ERROR (400) for a record without its payload.
 */
export async function redeliver(
  deps: WebhookServiceDeps,
  teamId: string,
  id: string,
  deliveryId: string,
): Promise<DeliveryView> {
  const webhook = await findOrThrow(deps.db, teamId, id);
  const delivery = await webhookRepository.findDelivery(deps.db, teamId, id, deliveryId);
  if (!delivery) throw notFound('Webhook delivery');
  if (!isPayload(delivery.payload)) {
    // A record whose payload was lost (before session 14, see recordAttempts): it sent the body `null`.
    throw validationError(
      [{ path: 'params.deliveryId', message: 'this delivery has no payload to send again' }],
      'This delivery has no payload to send again',
    );
  }
  const attempt = await webhookRepository.takeManualAttempt(deps.db, id, delivery.messageId);
  const outcome = await attemptDelivery(webhookClientFor(deps.config), deps.encryptionKey, {
    webhook,
    messageId: delivery.messageId,
    event: delivery.event,
    ...withBody(delivery.payload),
    attempt,
  });
  return recordNow(deps, outcome);
}

/**
 * `GET /api/webhooks/:id/deliveries` (spec: array of webhook deliveries; issue #11: newest first,
 * optional `success`, `limit` 1-1,000, default 100).
 * @throws NOT_FOUND (404).
 */
export async function listDeliveries(
  db: Database,
  teamId: string,
  id: string,
  query: ListDeliveriesQuery,
): Promise<DeliveryView[]> {
  await findOrThrow(db, teamId, id);
  return (await webhookRepository.listDeliveries(db, teamId, id, query)).map(toDeliveryView);
}
