import type { JobHandlers } from '../../jobs/registry.ts';
import { type MaintenanceLoopDeps, startMaintenanceLoop } from './maintenance-loop.ts';

/**
 * The maintenance module's worker bindings, for the composition root (job-handlers.ts): no pg-boss
 * job, the maintenance loop as a worker loop (started by startWorkers, roles all and worker).
 */
export function maintenanceJobHandlers(deps: MaintenanceLoopDeps): Pick<JobHandlers, 'loops'> {
  return { loops: [() => startMaintenanceLoop(deps)] };
}
