import { LRUCache } from 'lru-cache';
import type { Config } from '../../config.ts';
import type { Database } from '../../db/client.ts';
import type { JobPayload } from '../../jobs/definitions.ts';
import { WEBHOOK_DELIVER_JOB } from '../../jobs/definitions.ts';
import type { BatchHandler, JobQueue, SETTLED } from '../../jobs/queue.ts';
import type { JobHandlers, WorkerDeps } from '../../jobs/registry.ts';
import { attemptDelivery } from './webhook-attempt.ts';
import { type WebhookClient, webhookClientFor } from './webhook-client.ts';
import { WebhookAttemptRecorder } from './webhook-recorder.ts';
import { type HandedJob, type WebhookRow, webhookRepository } from './webhooks.repository.ts';

/** Webhook rows a delivery handler keeps for jobs handed over (see createDeliverWebhookHandler). */
const WEBHOOK_ROWS_KEPT = 1_000;
/** Handed-over jobs whose statement's view of their webhook waits for the handler (bounded). */
const HANDED_JOBS_KEPT = 10_000;

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
 * batched worker). Per batch: ONE query loads the batch's webhooks — none for jobs the recorder's
 * statement handed over (JobQueue.handoffStatement) when that statement saw the same version
 * (`updatedAt`) of their webhook as the row kept from an earlier lookup, with its `isActive` as
 * the statement left it (deleted: as gone); then per job, concurrently:
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
  // The webhooks' rows as last read, reused for jobs a record statement handed over when that
  // statement saw the same row version (updatedAt) — no lookup, and never staler than one.
  const rows = new LRUCache<string, WebhookRow>({ max: WEBHOOK_ROWS_KEPT });
  // What the statement that handed a job over saw of its webhook (null: gone), by job id, until
  // the job's batch reads it; past HANDED_JOBS_KEPT the oldest entries go first. A Map, not an
  // LRUCache: this one empties after nearly every batch, and lru-cache clears its whole
  // max-length key and value arrays whenever its last entry is deleted (lru-cache 11 `#delete`),
  // 20,000 writes per batch here (about 1 % of the worker's CPU in bench:webhooks, perf).
  const handedOver = new Map<string, HandedJob['webhook']>();
  const recorder = new WebhookAttemptRecorder(deps.db, deps.queue, (handed) => {
    for (const job of handed) {
      if (handedOver.size >= HANDED_JOBS_KEPT) handedOver.delete(handedOver.keys().next().value!);
      handedOver.set(job.id, job.webhook);
    }
    deps.queue.adopt(WEBHOOK_DELIVER_JOB, handed);
  });
  const client = deps.client ?? webhookClientFor(deps.config);
  const schedule = deps.config.WEBHOOK_RETRY_SCHEDULE;
  return (jobs) => {
    // A webhook as the statement that handed one of these jobs over saw it (jobs handed over
    // together come from one statement); undefined for fetched jobs.
    const seen = new Map<string, HandedJob['webhook']>();
    for (const job of jobs) {
      const webhook = handedOver.get(job.id);
      if (webhook === undefined) continue;
      handedOver.delete(job.id);
      seen.set(job.data.webhookId, webhook);
    }
    const known = new Map<string, WebhookRow | undefined>();
    const unknown: string[] = [];
    for (const webhookId of new Set(jobs.map((job) => job.data.webhookId))) {
      const confirmed = seen.get(webhookId);
      const row = rows.get(webhookId);
      if (confirmed === null) known.set(webhookId, undefined);
      else if (confirmed && row && row.updatedAt.getTime() === confirmed.updatedAt.getTime())
        known.set(
          webhookId,
          row.isActive === confirmed.isActive ? row : { ...row, isActive: confirmed.isActive },
        );
      else unknown.push(webhookId);
    }
    const loaded =
      unknown.length === 0
        ? Promise.resolve(known)
        : webhookRepository.findMany(deps.db, unknown).then((found) => {
            for (const row of found) {
              rows.set(row.id, row);
              known.set(row.id, row);
            }
            return known;
          });
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
