import { newId } from '../../src/ids.ts';
import { JobQueue } from '../../src/jobs/queue.ts';
import type { AttemptOutcome } from '../../src/modules/webhooks/webhook-attempt.ts';
import { createTestDatabase } from './database.ts';

/** A test database of its own with a started JobQueue on it (pg-boss schema and queues created). */
export interface TestJobQueue {
  database: Awaited<ReturnType<typeof createTestDatabase>>;
  queue: JobQueue;
  /** Stops the queue (its loops given 2 s) and drops the database. */
  close(): Promise<void>;
}

/**
 * Creates a test database, starts a JobQueue on it and creates the pg-boss queues `names` (none by
 * default), for tests of the claim loop and of worker loops stopped with the queue.
 */
export async function startTestJobQueue(names: string[] = []): Promise<TestJobQueue> {
  const database = await createTestDatabase();
  const queue = new JobQueue(database.handle);
  await queue.start();
  for (const name of names) await queue.boss.createQueue(name);
  return {
    database,
    queue,
    close: async () => {
      await queue.stop(2_000);
      await database.drop();
    },
  };
}

/**
 * A delivery attempt's outcome as attemptDelivery returns it, without a request: 200 "ok" when
 * `success` (default), else 500 "no"; its record at `at` (default now), attempt 1.
 */
export function attemptOutcome(attempt: {
  teamId: string;
  webhookId: string;
  messageId: string;
  payload: Record<string, unknown>;
  event?: string;
  success?: boolean;
  at?: Date;
}): AttemptOutcome {
  const success = attempt.success ?? true;
  const responseStatus = success ? 200 : 500;
  const responseBody = success ? 'ok' : 'no';
  return {
    result: { success, responseStatus, responseBody, error: null, durationMs: 2 },
    body: JSON.stringify(attempt.payload),
    delivery: {
      id: newId('webhookDelivery'),
      teamId: attempt.teamId,
      webhookId: attempt.webhookId,
      messageId: attempt.messageId,
      event: attempt.event ?? 'email.sent',
      payload: attempt.payload,
      responseStatus,
      responseBody,
      success,
      attemptCount: 1,
      durationMs: 2,
      error: null,
      createdAt: attempt.at ?? new Date(),
    },
  };
}
