/**
 * The maintenance module's public face: the workers' periodic deletes of what grows without bound
 * (expired idempotency keys, sessions and provider event tokens; with LOG_RETENTION_DAYS, old email
 * logs and webhook delivery records), and how long provider event tokens are kept.
 */

export { PROVIDER_EVENT_TOKEN_RETENTION_MS } from './maintenance.repository.ts';
export { type MaintenanceReport, sweepExpiredIdempotencyKeys } from './maintenance.service.ts';
export { maintenanceJobHandlers } from './maintenance-jobs.ts';
export {
  MAINTENANCE_LOCK_KEY,
  type MaintenanceLogger,
  MaintenanceLoop,
  type MaintenanceLoopDeps,
} from './maintenance-loop.ts';
