import type { Config } from '../../config.ts';
import type { Database } from '../../db/client.ts';
import type { JobPayload } from '../../jobs/definitions.ts';
import type { BatchHandler, JobQueue, SETTLED } from '../../jobs/queue.ts';
import type { JobHandlers, WorkerDeps } from '../../jobs/registry.ts';
import { attemptDelivery } from './webhook-attempt.ts';
import { type WebhookClient, webhookClientFor } from './webhook-client.ts';
import { WebhookAttemptRecorder } from './webhook-recorder.ts';
import { webhookRepository } from './webhooks.repository.ts';

/** What the `webhook.deliver` handler needs. */
export interface DeliverWebhookDeps {
  db: Database;
  queue: JobQueue;
  encryptionKey: Buffer;
  config: Pick<Config, 'WEBHOOK_RETRY_SCHEDULE' | 'WEBHOOK_TIMEOUT_SECONDS' | 'WEBHOOKS_ALLOW_PRIVATE'>;
  /** The HTTP client (default: the process's, see webhookClientFor). */
  client?: WebhookClient;
}

/**
 * The `webhook.deliver` batch handler, run in the claim loop (issue #11: deliveries go through the
 * batched worker). Per batch: ONE query loads the batch's webhooks; then per job, concurrently:
 * a deleted or inactive webhook's attempt is dropped (completed without a request); otherwise one
 * signed POST ({@link attemptDelivery}), recorded through the group-commit recorder together with
 * its successor when it failed: attempt n+1 after WEBHOOK_RETRY_SCHEDULE[n-1] seconds, up to
 * 1 + the schedule's length attempts; none after a 410 (the webhook is disabled) or once the
 * webhook was disabled. The attempt's job is completed in the recorder's transaction (one commit
 * per group of attempts, not one for the record and one for the job), and its promise resolves
 * with SETTLED once that committed; a recording failure rejects it, the loop fails the job and
 * pg-boss retries it (the receiver may then see the message twice).
 */
export function createDeliverWebhookHandler(
  deps: DeliverWebhookDeps,
): BatchHandler<JobPayload<'webhook.deliver'>> {
  const recorder = new WebhookAttemptRecorder(deps.db, deps.queue);
  const client = deps.client ?? webhookClientFor(deps.config);
  const schedule = deps.config.WEBHOOK_RETRY_SCHEDULE;
  return (jobs) => {
    const loaded = webhookRepository
      .findMany(deps.db, [...new Set(jobs.map((job) => job.data.webhookId))])
      .then((rows) => new Map(rows.map((row) => [row.id, row])));
    return jobs.map(async (job): Promise<undefined | typeof SETTLED> => {
      const { data } = job;
      const webhook = (await loaded).get(data.webhookId);
      // A deleted or disabled webhook: no request, the job is completed with the group.
      if (!webhook || webhook.teamId !== data.teamId || !webhook.isActive) return recorder.record({ job });
      const outcome = await attemptDelivery(client, deps.encryptionKey, { ...data, webhook });
      const delay = schedule[data.attempt - 1];
      const retry = !outcome.result.success && outcome.result.responseStatus !== 410 && delay !== undefined;
      return recorder.record({
        outcome,
        next: retry ? { data: { ...data, attempt: data.attempt + 1 }, delaySeconds: delay } : undefined,
        job,
      });
    });
  };
}

/** The webhooks module's job bindings, for the composition root (job-handlers.ts). */
export function webhookJobHandlers(deps: WorkerDeps): Pick<JobHandlers, 'webhook.deliver'> {
  return { 'webhook.deliver': { kind: 'batch', handle: createDeliverWebhookHandler(deps) } };
}
