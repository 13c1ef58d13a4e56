import type { Config } from '../config.ts';
import type { Database } from '../db/client.ts';
import type { ProviderCache } from '../providers/index.ts';
import { JOB_DEFINITIONS, type JobName, type JobPayload, teamSendsInFlight } from './definitions.ts';
import {
  type BatchHandler,
  type ClaimedJob,
  type JobQueue,
  PermanentJobError,
  type QueuedJob,
} from './queue.ts';

/**
 * What job handlers may use (each module builds its handlers from it): the part of the context
 * (server/src/context.ts) below the modules. The composition root passes the whole context.
 */
export interface WorkerDeps {
  config: Config;
  db: Database;
  encryptionKey: Buffer;
  /** Open providers (connection pools), shared by every job of this context. */
  providers: ProviderCache;
}

/** A handler per job (pg-boss work loop), or per batch (claim loop, for throughput). */
export type JobBinding<N extends JobName> =
  | { kind: 'job'; handle: (job: QueuedJob<JobPayload<N>>) => Promise<void> }
  | { kind: 'batch'; handle: BatchHandler<JobPayload<N>> };

/**
 * Exactly one handler per job name (a missing one is a type error; checked again at start). Each
 * module provides the bindings of its own jobs (e.g. emails: `email.send`, `email.send.failed`)
 * and the composition root merges them, so jobs imports no module (issue #9).
 */
export type JobHandlers = { [N in JobName]: JobBinding<N> } & {
  /**
   * Worker loops over tables of their own rather than pg-boss jobs (the webhook dispatcher, issue
   * #11), each started by startWorkers and stopped with the queue (JobQueue.attach).
   */
  loops?: readonly (() => { stop(timeoutMs: number): Promise<void> })[];
};

/** Creates every queue of {@link JOB_DEFINITIONS} with its policies (API and worker processes). */
export async function declareQueues(queue: JobQueue, config: Config): Promise<void> {
  for (const [name, definition] of Object.entries(JOB_DEFINITIONS)) {
    await queue.declareQueue(name, {
      retry: definition.retry(config),
      deadLetter: definition.deadLetter,
      expireInSeconds: definition.expireInSeconds(config),
      heartbeatSeconds: 'heartbeatSeconds' in definition ? definition.heartbeatSeconds : undefined,
    });
  }
}

/** Emails claimed per fetch at most (one fetch, then one query each for logs, adapters, versions). */
const SEND_BATCH_SIZE = 100;
/** Jobs fetched per poll by the per-job queues (invitations, dead letters: low volume). */
const JOB_BATCH_SIZE = 20;

/**
 * Starts the workers: each job's payload is validated with its schema before its handler sees it
 * (an unparseable payload goes straight to the dead-letter queue: retrying cannot fix it).
 * `email.send` runs in a claim loop: up to WORKER_CONCURRENCY emails in flight per process, at
 * most {@link teamSendsInFlight} of one team across all workers, each job settled when its own
 * email is done (issues #8, #9).
 */
export async function startWorkers(queue: JobQueue, config: Config, handlers: JobHandlers): Promise<void> {
  for (const name of Object.keys(JOB_DEFINITIONS) as JobName[]) {
    // Each handler gets the payload its own job's schema parsed below, hence the widening.
    const binding = handlers[name] as JobBinding<JobName>;
    if (typeof binding?.handle !== 'function') throw new Error(`No handler registered for job "${name}"`);
    const definition = JOB_DEFINITIONS[name];
    const parse = (data: unknown): JobPayload<JobName> => {
      const parsed = definition.payload.safeParse(data);
      if (!parsed.success) throw new PermanentJobError(`Unreadable ${name} payload: ${parsed.error.message}`);
      return parsed.data;
    };
    if (binding.kind === 'batch') {
      await queue.consume<JobPayload<JobName>>(
        name,
        {
          maxInFlight: config.WORKER_CONCURRENCY,
          batchSize: Math.min(SEND_BATCH_SIZE, config.WORKER_CONCURRENCY),
          groupConcurrency: teamSendsInFlight(config),
          pollingIntervalMs: 500,
          heartbeatRefreshMs: 5_000,
          deadLetter: definition.deadLetter,
        },
        (jobs) => handleParsed(jobs, parse, binding.handle),
      );
      continue;
    }
    await queue.work<JobPayload<JobName>>(
      name,
      { batchSize: Math.min(JOB_BATCH_SIZE, config.WORKER_CONCURRENCY), pollingIntervalSeconds: 0.5 },
      async (job) => binding.handle({ ...job, data: parse(job.data) }),
    );
  }
  for (const start of handlers.loops ?? []) queue.attach(start());
}

/** Runs `handle` on the jobs whose payload parses; the others reject with their parse error. */
function handleParsed<T>(
  jobs: ClaimedJob<unknown>[],
  parse: (data: unknown) => T,
  handle: BatchHandler<T>,
): ReturnType<BatchHandler<T>> {
  const results: ReturnType<BatchHandler<T>> = new Array(jobs.length);
  const readable: ClaimedJob<T>[] = [];
  const positions: number[] = [];
  jobs.forEach((job, index) => {
    try {
      readable.push({ ...job, data: parse(job.data) });
      positions.push(index);
    } catch (error) {
      results[index] = Promise.reject(error);
    }
  });
  const handled = readable.length > 0 ? handle(readable) : [];
  positions.forEach((position, i) => {
    results[position] =
      handled[i] ?? Promise.reject(new Error('The handler returned no promise for this job'));
  });
  return results;
}
