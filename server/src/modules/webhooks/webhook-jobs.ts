import type { JobHandlers, WorkerDeps } from '../../jobs/registry.ts';
import { startWebhookDispatcher } from './webhook-dispatcher.ts';

/**
 * The webhooks module's worker bindings, for the composition root (job-handlers.ts): no pg-boss
 * job, the outbox's dispatcher as a worker loop (issue #11).
 */
export function webhookJobHandlers(deps: WorkerDeps): Pick<JobHandlers, 'loops'> {
  return { loops: [() => startWebhookDispatcher(deps)] };
}
