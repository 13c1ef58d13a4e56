export { WEBHOOK_EVENTS, type WebhookEvent } from './webhook-events.ts';
export { webhookJobHandlers } from './webhook-jobs.ts';
export { createWebhookOutbox, installWebhookOutbox } from './webhook-outbox.ts';
export { decryptWebhookSecret } from './webhook-secret-store.ts';
export { webhookRoutes } from './webhooks.routes.ts';
