import type { Context } from './context.ts';
import type { JobHandlers } from './jobs/registry.ts';
import { emailJobHandlers } from './modules/emails/index.ts';
import { maintenanceJobHandlers } from './modules/maintenance/index.ts';
import { teamJobHandlers } from './modules/teams/index.ts';
import { templateJobHandlers } from './modules/templates/index.ts';
import { installWebhookOutbox, webhookJobHandlers } from './modules/webhooks/index.ts';

/**
 * Every job's handler, gathered from the modules that own the jobs (part of the composition root,
 * with context.ts, app.ts and runtime.ts: the one place that wires modules into the job system,
 * issue #9 "Dependencies point one way"). A job without a handler is a type error here.
 * Also wires the status-change listeners (see {@link wireStatusListeners}): workers change statuses.
 * The modules' worker loops are concatenated (the webhook dispatcher, the maintenance loop).
 * @returns the bindings `startWorkers` runs, built over the process's `context` (the same one the
 *   API is built over: database, config, encryption key, queue, providers, storage).
 */
export function bindJobHandlers(context: Context): JobHandlers {
  wireStatusListeners();
  const webhooks = webhookJobHandlers(context);
  const maintenance = maintenanceJobHandlers({
    database: context.database,
    config: context.config,
    logger: context.logger,
  });
  return {
    ...emailJobHandlers(context),
    ...teamJobHandlers(context),
    ...templateJobHandlers(context),
    loops: [...(webhooks.loops ?? []), ...(maintenance.loops ?? [])],
  };
}

/**
 * Plugs the webhook outbox into the emails module's status changes (issue #11): every status change
 * of this process writes its webhook deliveries to the outbox, in its own transaction. Called by
 * the API (app.ts) and the workers (above), the two kinds of process that change statuses.
 */
export function wireStatusListeners(): void {
  installWebhookOutbox();
}
