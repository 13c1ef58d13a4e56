export { type AcceptBatcher, createAcceptBatcher } from './accept-batcher.ts';
export { type CallerFields, callerFieldsOf } from './caller-fields.ts';
export type { RecipientEvent } from './email-recipients.ts';
export { EMAIL_STATUSES, type EmailStatus } from './email-status.ts';
export { logRoutes, sendRoutes } from './emails.routes.ts';
export {
  type EmailRef,
  type StatusEvent,
  type TransitionResult,
  transitionMany,
} from './emails.status.service.ts';
export { RecipientTracker } from './recipient-outcomes.ts';
export { createSendEmailHandler, createUndeliveredEmailHandler, emailJobHandlers } from './send-email.job.ts';
export {
  onStatusChange,
  type StatusChangedEmail,
  type StatusChangeListener,
} from './status-listeners.ts';
