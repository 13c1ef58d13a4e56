export { createDeliverWebhookHandler, webhookJobHandlers } from './webhook-delivery.job.ts';
export { WEBHOOK_EVENTS, type WebhookEvent } from './webhook-events.ts';
export { createWebhookOutbox, installWebhookOutbox } from './webhook-outbox.ts';
export { webhookRoutes } from './webhooks.routes.ts';
