import type { Config } from '../config.ts';
import type { Database } from '../db/client.ts';
import { createSendEmailHandler, createUndeliveredEmailHandler } from '../modules/emails/index.ts';
import { createSendInvitationHandler } from '../modules/teams/index.ts';
import { JOB_DEFINITIONS, type JobName, type JobPayload } from './definitions.ts';
import { type JobQueue, PermanentJobError, type QueuedJob } from './queue.ts';

/** What job handlers may use. */
export interface WorkerDeps {
  config: Config;
  db: Database;
  encryptionKey: Buffer;
}

type Handlers = { [N in JobName]: (job: QueuedJob<JobPayload<N>>) => Promise<void> };

/** Exactly one handler per job name (a missing one is a type error; checked again at start). */
function bindHandlers(deps: WorkerDeps): Handlers {
  return {
    'email.send': createSendEmailHandler(deps),
    'email.send.failed': createUndeliveredEmailHandler(deps),
    'invitation.send': createSendInvitationHandler(deps),
  };
}

/** Creates every queue of {@link JOB_DEFINITIONS} with its retry policy (API and worker processes). */
export async function declareQueues(queue: JobQueue, config: Config): Promise<void> {
  for (const [name, definition] of Object.entries(JOB_DEFINITIONS)) {
    await queue.declareQueue(name, definition.retry(config), definition.deadLetter);
  }
}

/**
 * Starts the workers: each job's payload is validated with its schema before its handler runs (an
 * unparseable payload goes straight to the dead-letter queue: retrying cannot fix it). Batches of up
 * to WORKER_CONCURRENCY jobs per poll.
 */
export async function startWorkers(queue: JobQueue, deps: WorkerDeps): Promise<void> {
  const handlers = bindHandlers(deps);
  for (const name of Object.keys(JOB_DEFINITIONS) as JobName[]) {
    // Each handler gets the payload its own job's schema parsed below, hence the widening.
    const handler = handlers[name] as (job: QueuedJob<JobPayload<JobName>>) => Promise<void>;
    if (typeof handler !== 'function') throw new Error(`No handler registered for job "${name}"`);
    const schema = JOB_DEFINITIONS[name].payload;
    await queue.work<JobPayload<typeof name>>(
      name,
      { batchSize: deps.config.WORKER_CONCURRENCY, pollingIntervalSeconds: 0.5 },
      async (job) => {
        const parsed = schema.safeParse(job.data);
        if (!parsed.success)
          throw new PermanentJobError(`Unreadable ${name} payload: ${parsed.error.message}`);
        await handler({ ...job, data: parsed.data });
      },
    );
  }
}
