import type { Context } from './context.ts';
import type { JobHandlers } from './jobs/registry.ts';
import { emailJobHandlers } from './modules/emails/index.ts';
import { teamJobHandlers } from './modules/teams/index.ts';

/**
 * Every job's handler, gathered from the modules that own the jobs (part of the composition root,
 * with context.ts, app.ts and runtime.ts: the one place that wires modules into the job system,
 * issue #9 "Dependencies point one way"). A job without a handler is a type error here.
 * @returns the bindings `startWorkers` runs, built over the process's `context` (the same one the
 *   API is built over: database, config, encryption key, providers, storage).
 */
export function bindJobHandlers(context: Context): JobHandlers {
  return { ...emailJobHandlers(context), ...teamJobHandlers(context) };
}
