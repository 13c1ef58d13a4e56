import type { JobHandlers, WorkerDeps } from './jobs/registry.ts';
import { emailJobHandlers } from './modules/emails/index.ts';
import { teamJobHandlers } from './modules/teams/index.ts';

/**
 * Every job's handler, gathered from the modules that own the jobs (part of the composition root,
 * with app.ts and runtime.ts: the one place that wires modules into the job system, issue #9
 * "Dependencies point one way"). A job without a handler is a type error here.
 * @returns the bindings `startWorkers` runs, built over `deps` (database, config, encryption key).
 */
export function bindJobHandlers(deps: WorkerDeps): JobHandlers {
  return { ...emailJobHandlers(deps), ...teamJobHandlers(deps) };
}
