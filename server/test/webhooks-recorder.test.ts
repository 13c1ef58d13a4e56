import { eq } from 'drizzle-orm';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { teams, webhookDeliveries, webhooks } from '../src/db/schema/index.ts';
import { newId, newJobId } from '../src/ids.ts';
import { type JobPayload, WEBHOOK_DELIVER_JOB } from '../src/jobs/definitions.ts';
import { type ClaimedJob, type JobQueue, SETTLED } from '../src/jobs/queue.ts';
import type { AttemptOutcome } from '../src/modules/webhooks/webhook-attempt.ts';
import { WebhookAttemptRecorder } from '../src/modules/webhooks/webhook-recorder.ts';
import { waitFor } from './helpers/app.ts';
import { attemptOutcome, startTestJobQueue, type TestJobQueue } from './helpers/job-queue.ts';
import { statementsDuring } from './helpers/pool-statements.ts';

/**
 * The webhook attempt recorder's one-statement path (issue #11 bench): a group of attempts with no
 * retry to schedule is recorded — delivery records, the webhook's counters and the completion of
 * the claimed jobs — by ONE statement outside any transaction (one round trip instead of begin,
 * complete, record, commit), atomically.
 */
describe('webhook attempt recorder', () => {
  let jobQueue: TestJobQueue;
  let database: TestJobQueue['database'];
  let queue: JobQueue;
  const teamId = newId('team');
  const webhookId = newId('webhook');

  beforeAll(async () => {
    jobQueue = await startTestJobQueue();
    ({ database, queue } = jobQueue);
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
    await jobQueue?.close();
  });

  /** Enqueues `n` jobs of the webhook, claims them with the app's claim loop, hands them over unsettled. */
  const claimJobs = async (n: number, first: number) => {
    const data = (i: number): JobPayload<'webhook.deliver'> => ({
      webhookId,
      teamId,
      messageId: `msg_${i}`,
      event: 'email.sent',
      payload: { type: 'email.sent', i },
      attempt: 1,
    });
    const ids = Array.from({ length: n }, () => newJobId().uuid);
    await database.handle.db.transaction((tx) =>
      queue.enqueueMany(
        tx,
        WEBHOOK_DELIVER_JOB,
        ids.map((id, i) => ({ id, data: data(first + i) })),
      ),
    );
    await waitFor(
      async () => (ids.every((id) => claimed.some((job) => job.id === id)) ? true : undefined),
      10_000,
      'the claimed jobs',
    );
    return claimed.filter((job) => ids.includes(job.id));
  };
  const claimed: ClaimedJob<JobPayload<'webhook.deliver'>>[] = [];
  const release: (() => void)[] = [];
  const outcome = (job: ClaimedJob<JobPayload<'webhook.deliver'>>, at: Date): AttemptOutcome =>
    attemptOutcome({ ...job.data, at });

  it('records a group of successful attempts and completes their jobs in one statement', async () => {
    const { db, pool } = database.handle;
    // The app's claim loop claims the jobs; the handler hands them over unsettled.
    await queue.consume<JobPayload<'webhook.deliver'>>(
      WEBHOOK_DELIVER_JOB,
      { maxInFlight: 10, batchSize: 10, pollingIntervalMs: 50 },
      (jobs) =>
        jobs.map((job) => {
          claimed.push(job);
          return new Promise<typeof SETTLED>((resolve) => release.push(() => resolve(SETTLED)));
        }),
    );
    const jobs = await claimJobs(3, 1);

    const recorder = new WebhookAttemptRecorder(db, queue);
    const at = new Date();
    const statements = await statementsDuring(pool, () =>
      Promise.all(jobs.map((job) => recorder.record({ outcome: outcome(job, at), job }))),
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
    // The body sent is stored as the payload (spliced in, not serialised a second time).
    expect(records.find((row) => row.messageId === 'msg_2')?.payload).toEqual({ type: 'email.sent', i: 2 });
    const [hook] = await db.select().from(webhooks).where(eq(webhooks.id, webhookId));
    expect(hook).toMatchObject({ consecutiveFailures: 0, lastSuccessAt: at, lastTriggeredAt: at });
    for (const job of jobs) {
      const stored = await queue.boss.getJobById(WEBHOOK_DELIVER_JOB, job.id);
      expect(stored?.state).toBe('completed');
    }
  }, 30_000);

  it('sends every group as the same named statement, whatever its size (parsed once per connection)', async () => {
    const { db, pool } = database.handle;
    const recorder = new WebhookAttemptRecorder(db, queue);
    const sent: { name?: string; text?: string }[] = [];
    const query = pool.query;
    pool.query = function (this: typeof pool, ...args: unknown[]) {
      if (typeof args[0] === 'object') sent.push(args[0] as { name?: string; text?: string });
      return (query as (...a: unknown[]) => unknown).apply(this, args);
    } as typeof pool.query;
    try {
      for (const size of [1, 2]) {
        const jobs = await claimJobs(size, 10 * size);
        await Promise.all(jobs.map((job) => recorder.record({ outcome: outcome(job, new Date()), job })));
      }
    } finally {
      pool.query = query;
      for (const done of release) done();
    }
    const recordings = sent.filter((statement) => /completed as \(update/i.test(statement.text ?? ''));
    expect(recordings).toHaveLength(2);
    expect(recordings[0]?.name).toMatch(/^pw_[0-9a-f]{32}$/);
    expect(recordings[1]?.name).toBe(recordings[0]?.name);
    const records = await db
      .select()
      .from(webhookDeliveries)
      .where(eq(webhookDeliveries.webhookId, webhookId));
    expect(records.map((row) => row.messageId)).toEqual(
      expect.arrayContaining(['msg_10', 'msg_20', 'msg_21']),
    );
  }, 30_000);

  it('schedules the retry of a failed attempt whose webhook row needs no other change', async () => {
    // A healthy webhook, just triggered: a group of successes only would leave its row alone
    // (lastTriggeredAt and lastSuccessAt are kept to the second). This group's failure comes first,
    // its success after, so the row's counters stay as they are, and the failure's retry must
    // still be enqueued.
    const { db } = database.handle;
    const healthy = newId('webhook');
    const now = new Date();
    await db.insert(webhooks).values({
      id: healthy,
      teamId,
      name: 'healthy',
      url: 'https://receiver.example/healthy',
      events: ['email.sent'],
      secretEncrypted: 'v2:unused',
      lastTriggeredAt: now,
      lastSuccessAt: now,
    });
    const attempt = (messageId: string, success: boolean, at: Date) =>
      attemptOutcome({ teamId, webhookId: healthy, messageId, payload: { type: 'email.sent' }, success, at });
    const recorder = new WebhookAttemptRecorder(db, queue);
    const next: JobPayload<'webhook.deliver'> = {
      webhookId: healthy,
      teamId,
      messageId: 'msg_retried',
      event: 'email.sent',
      payload: { type: 'email.sent' },
      attempt: 2,
    };
    await Promise.all([
      recorder.record({
        outcome: attempt('msg_retried', false, now),
        next: { data: next, delaySeconds: 60 },
      }),
      recorder.record({ outcome: attempt('msg_fine', true, new Date(now.getTime() + 1)) }),
    ]);

    const { rows } = await database.handle.pool.query<{ attempt: number }>(
      `select (data->>'attempt')::int as attempt from pgboss.job
        where name = $1 and data->>'messageId' = 'msg_retried'`,
      [WEBHOOK_DELIVER_JOB],
    );
    expect(rows).toEqual([{ attempt: 2 }]);
  }, 30_000);
});
