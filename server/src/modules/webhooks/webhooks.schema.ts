import { z } from 'zod';
import { queryInteger } from '../../http/envelope.ts';
import { WEBHOOK_EVENTS } from './webhook-events.ts';

const name = z.string().trim().min(1).max(100);
const url = z.string().trim().min(1).max(2048);
/** A non-empty subset of the spec's event names (spec "Webhook": events); duplicates dropped. */
const events = z
  .array(z.enum(WEBHOOK_EVENTS))
  .min(1)
  .transform((list) => [...new Set(list)]);

export const createWebhookBody = z.object({ name, url, events });
export type CreateWebhookInput = z.infer<typeof createWebhookBody>;

export const updateWebhookBody = z.object({
  name: name.optional(),
  url: url.optional(),
  events: events.optional(),
  isActive: z.boolean().optional(),
});
export type UpdateWebhookInput = z.infer<typeof updateWebhookBody>;

export const webhookIdParams = z.object({ id: z.string().min(1) });
export const deliveryParams = z.object({ id: z.string().min(1), deliveryId: z.string().min(1) });

/** Most delivery records one list returns (issue #11). */
export const MAX_DELIVERIES_LIMIT = 1000;

/** `GET /api/webhooks/:id/deliveries?success=&limit=` (issue #11): newest first, 100 by default. */
export const listDeliveriesQuery = z.object({
  success: z
    .enum(['true', 'false'])
    .transform((v) => v === 'true')
    .optional(),
  limit: queryInteger({ min: 1, max: MAX_DELIVERIES_LIMIT, fallback: 100 }),
});
export type ListDeliveriesQuery = z.infer<typeof listDeliveriesQuery>;

/** A webhook as reads show it (spec "Webhook"; the secret never). */
export const webhookView = z.object({
  id: z.string(),
  name: z.string(),
  url: z.string(),
  events: z.array(z.string()),
  isActive: z.boolean(),
  /** Why the service disabled it (410 Gone, 5 days of failures); null otherwise. */
  disabledReason: z.string().nullable(),
  lastTriggeredAt: z.string().nullable(),
  lastSuccessAt: z.string().nullable(),
  consecutiveFailures: z.number(),
  createdAt: z.string(),
  updatedAt: z.string(),
});
export type WebhookView = z.infer<typeof webhookView>;

/** Create response (spec: id, name, url, events, isActive, consecutiveFailures, createdAt) + the secret, once. */
export const createdWebhookView = webhookView
  .pick({
    id: true,
    name: true,
    url: true,
    events: true,
    isActive: true,
    consecutiveFailures: true,
    createdAt: true,
  })
  .extend({ secret: z.string() });

/** Update response (spec: id, name, url, events, isActive, updatedAt). */
export const updatedWebhookView = webhookView.pick({
  id: true,
  name: true,
  url: true,
  events: true,
  isActive: true,
  updatedAt: true,
});

/** `POST /api/webhooks/:id/rotate-secret`: the new secret, and until when the old one still signs. */
export const rotatedSecretView = z.object({
  id: z.string(),
  secret: z.string(),
  previousSecretExpiresAt: z.string(),
});

/** A delivery record (spec "Webhook delivery") plus messageId (`webhook-id`), durationMs and error. */
export const deliveryView = z.object({
  id: z.string(),
  webhookId: z.string(),
  messageId: z.string(),
  event: z.string(),
  // null only in a record written before session 14 whose payload was lost (see recordAttempts).
  payload: z.record(z.string(), z.unknown()).nullable(),
  responseStatus: z.number().nullable(),
  responseBody: z.string().nullable(),
  success: z.boolean(),
  attemptCount: z.number(),
  durationMs: z.number().nullable(),
  error: z.string().nullable(),
  createdAt: z.string(),
});
export type DeliveryView = z.infer<typeof deliveryView>;
