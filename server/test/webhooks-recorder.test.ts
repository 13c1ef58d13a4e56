import { eq } from 'drizzle-orm';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { teams, webhookDeliveries, webhooks } from '../src/db/schema/index.ts';
import { newId, newJobId } from '../src/ids.ts';
import { type JobPayload, WEBHOOK_DELIVER_JOB } from '../src/jobs/definitions.ts';
import { type ClaimedJob, JobQueue, SETTLED } from '../src/jobs/queue.ts';
import type { AttemptOutcome } from '../src/modules/webhooks/webhook-attempt.ts';
import { WebhookAttemptRecorder } from '../src/modules/webhooks/webhook-recorder.ts';
import { waitFor } from './helpers/app.ts';
import { createTestDatabase } from './helpers/database.ts';
import { statementsDuring } from './helpers/pool-statements.ts';

/**
 * The webhook attempt recorder's one-statement path (issue #11 bench): a group of attempts with no
 * retry to schedule is recorded — delivery records, the webhook's counters and the completion of
 * the claimed jobs — by ONE statement outside any transaction (one round trip instead of begin,
 * complete, record, commit), atomically.
 */
describe('webhook attempt recorder', () => {
  let database: Awaited<ReturnType<typeof createTestDatabase>>;
  let queue: JobQueue;
  const teamId = newId('team');
  const webhookId = newId('webhook');

  beforeAll(async () => {
    database = await createTestDatabase();
    queue = new JobQueue(database.handle);
    await queue.start();
    await queue.boss.createQueue(WEBHOOK_DELIVER_JOB);
    const { db } = database.handle;
    await db.insert(teams).values({ id: teamId, name: 'Recorder', slug: `recorder-${teamId}` });
    await db.insert(webhooks).values({
      id: webhookId,
      teamId,
      name: 'hook',
      url: 'https://receiver.example/hook',
      events: ['email.sent'],
      secretEncrypted: 'v2:unused',
      consecutiveFailures: 3,
    });
  });
  afterAll(async () => {
    await queue?.stop(2_000);
    await database?.drop();
  });

  it('records a group of successful attempts and completes their jobs in one statement', async () => {
    const { db, pool } = database.handle;
    const data = (n: number): JobPayload<'webhook.deliver'> => ({
      webhookId,
      teamId,
      messageId: `msg_${n}`,
      event: 'email.sent',
      payload: { type: 'email.sent', n },
      attempt: 1,
    });
    await db.transaction((tx) =>
      queue.enqueueMany(
        tx,
        WEBHOOK_DELIVER_JOB,
        [1, 2, 3].map((n) => ({ id: newJobId().uuid, data: data(n) })),
      ),
    );
    // Claim the three jobs with the app's claim loop; the handler hands them over unsettled.
    const claimed: ClaimedJob<JobPayload<'webhook.deliver'>>[] = [];
    const release: (() => void)[] = [];
    await queue.consume<JobPayload<'webhook.deliver'>>(
      WEBHOOK_DELIVER_JOB,
      { maxInFlight: 10, batchSize: 10, pollingIntervalMs: 50 },
      (jobs) =>
        jobs.map((job) => {
          claimed.push(job);
          return new Promise<typeof SETTLED>((resolve) => release.push(() => resolve(SETTLED)));
        }),
    );
    await waitFor(async () => (claimed.length === 3 ? true : undefined), 10_000, 'three claimed jobs');

    const recorder = new WebhookAttemptRecorder(db, queue);
    const at = new Date();
    const outcome = (job: ClaimedJob<JobPayload<'webhook.deliver'>>): AttemptOutcome => ({
      result: { success: true, responseStatus: 200, responseBody: 'ok', error: null, durationMs: 3 },
      delivery: {
        id: newId('webhookDelivery'),
        teamId,
        webhookId,
        messageId: job.data.messageId,
        event: job.data.event,
        payload: job.data.payload,
        responseStatus: 200,
        responseBody: 'ok',
        success: true,
        attemptCount: 1,
        durationMs: 3,
        error: null,
        createdAt: at,
      },
    });
    const statements = await statementsDuring(pool, () =>
      Promise.all(claimed.map((job) => recorder.record({ outcome: outcome(job), job }))),
    );
    for (const done of release) done();

    // One statement through the pool, none of them a transaction's BEGIN/COMMIT.
    expect(statements).toHaveLength(1);
    expect(statements[0]).toMatch(/completed as \(update "?pgboss/i);
    const records = await db
      .select()
      .from(webhookDeliveries)
      .where(eq(webhookDeliveries.webhookId, webhookId));
    expect(records.map((row) => row.messageId).sort()).toEqual(['msg_1', 'msg_2', 'msg_3']);
    const [hook] = await db.select().from(webhooks).where(eq(webhooks.id, webhookId));
    expect(hook).toMatchObject({ consecutiveFailures: 0, lastSuccessAt: at, lastTriggeredAt: at });
    for (const job of claimed) {
      const stored = await queue.boss.getJobById(WEBHOOK_DELIVER_JOB, job.id);
      expect(stored?.state).toBe('completed');
    }
  }, 30_000);
});
