import { eq } from 'drizzle-orm';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadConfig } from '../src/config.ts';
import { teams, webhooks } from '../src/db/schema/index.ts';
import { newId, newJobId } from '../src/ids.ts';
import { type JobPayload, WEBHOOK_DELIVER_JOB } from '../src/jobs/definitions.ts';
import type { ClaimedJob, JobQueue, SETTLED } from '../src/jobs/queue.ts';
import type { AttemptOutcome } from '../src/modules/webhooks/webhook-attempt.ts';
import { createDeliverWebhookHandler } from '../src/modules/webhooks/webhook-delivery.job.ts';
import { WebhookAttemptRecorder } from '../src/modules/webhooks/webhook-recorder.ts';
import { webhookRepository } from '../src/modules/webhooks/webhooks.repository.ts';
import { createWebhook } from '../src/modules/webhooks/webhooks.service.ts';
import { waitFor } from './helpers/app.ts';
import { attemptOutcome, startTestJobQueue, type TestJobQueue } from './helpers/job-queue.ts';
import { startWebhookReceiver, type WebhookReceiver } from './helpers/webhook-receiver.ts';

type Database = TestJobQueue['database'];
const ENCRYPTION_KEY = Buffer.alloc(32, 5);

/** A job payload of `webhookId` (team `teamId`) with message `msg_<label>`. */
const payload = (teamId: string, webhookId: string, label: string): JobPayload<'webhook.deliver'> => ({
  webhookId,
  teamId,
  messageId: `msg_${label}`,
  event: 'email.sent',
  payload: { type: 'email.sent', label },
  attempt: 1,
});

/** Enqueues jobs in ONE transaction of their own (so jobs enqueued later come later in the queue). */
async function enqueue(database: Database, queue: JobQueue, jobs: JobPayload<'webhook.deliver'>[]) {
  const ids = jobs.map(() => newJobId().uuid);
  await database.handle.db.transaction((tx) =>
    queue.enqueueMany(
      tx,
      WEBHOOK_DELIVER_JOB,
      jobs.map((data, i) => ({ id: ids[i]!, data })),
    ),
  );
  return ids;
}

/** Each job's state by message id, and the active jobs per webhook. */
async function jobStates(database: Database) {
  const { rows } = await database.handle.pool.query<{ message: string; webhook: string; state: string }>(
    `select data->>'messageId' as message, group_id as webhook, state::text as state
       from pgboss.job where name = $1`,
    [WEBHOOK_DELIVER_JOB],
  );
  return {
    state: new Map(rows.map((row) => [row.message, row.state])),
    active: (webhookId: string) =>
      rows.filter((row) => row.webhook === webhookId && row.state === 'active').length,
  };
}

/**
 * The hand-off (issue #11 bench): the statement that records a group of attempts and completes
 * their jobs also claims, in their place, waiting jobs of the same webhooks — among the first
 * waiting jobs in the queue's order only, never more per webhook than it completed — and gives them
 * to this process's claim loop, so a busy webhook's freed slots do not wait for the next fetch.
 */
describe('webhook delivery hand-off', () => {
  let jobQueue: TestJobQueue;
  let database: Database;
  let queue: JobQueue;
  const teamId = newId('team');
  const hookA = newId('webhook');
  const hookB = newId('webhook');
  /** Jobs the loop gave the handler, in order (never settled). */
  const handled: ClaimedJob<JobPayload<'webhook.deliver'>>[] = [];

  beforeAll(async () => {
    jobQueue = await startTestJobQueue();
    ({ database, queue } = jobQueue);
    const { db } = database.handle;
    await db.insert(teams).values({ id: teamId, name: 'Hand-off', slug: `handoff-${teamId}` });
    for (const id of [hookA, hookB]) {
      await db.insert(webhooks).values({
        id,
        teamId,
        name: id,
        url: 'https://receiver.example/hook',
        events: ['email.sent'],
        secretEncrypted: 'v2:unused',
      });
    }
  });
  afterAll(async () => {
    await jobQueue?.close();
  });

  const succeeded = (job: ClaimedJob<JobPayload<'webhook.deliver'>>): AttemptOutcome =>
    attemptOutcome(job.data);

  it('claims the next waiting jobs of the completed jobs webhook, in queue order, within its cap', async () => {
    // A's cap is 3: the first fetch takes a1–a3, a4 and a5 wait. The loop polls once a minute, so
    // only the hand-off claims more.
    await enqueue(
      database,
      queue,
      ['a1', 'a2', 'a3', 'a4', 'a5'].map((l) => payload(teamId, hookA, l)),
    );
    await queue.consume<JobPayload<'webhook.deliver'>>(
      WEBHOOK_DELIVER_JOB,
      { maxInFlight: 10, batchSize: 10, groupConcurrency: 3, pollingIntervalMs: 60_000 },
      (jobs) =>
        jobs.map((job) => {
          handled.push(job);
          return new Promise<typeof SETTLED>(() => {});
        }),
    );
    await waitFor(async () => (handled.length >= 3 ? true : undefined), 10_000, 'the first fetch');
    // Waiting now, in queue order: a4, a5, b1, a6.
    await enqueue(database, queue, [payload(teamId, hookB, 'b1')]);
    await enqueue(database, queue, [payload(teamId, hookA, 'a6')]);
    const messages = () => handled.map((job) => job.data.messageId.replace('msg_', ''));
    expect(messages()).toEqual(['a1', 'a2', 'a3']);
    // The jobs handed to the loop (the real adopt runs them), in order.
    const adopted: string[] = [];
    const adopt = queue.adopt.bind(queue);
    queue.adopt = (name, jobs) => {
      adopted.push(...jobs.map((job) => (job.data as JobPayload<'webhook.deliver'>).messageId.slice(4)));
      adopt(name, jobs);
    };
    const recorder = new WebhookAttemptRecorder(database.handle.db, queue);
    const record = (jobs: ClaimedJob<JobPayload<'webhook.deliver'>>[]) =>
      Promise.all(jobs.map((job) => recorder.record({ outcome: succeeded(job), job })));

    // a1 and a2, recorded together, are replaced by the first two waiting jobs, both A's.
    await record([handled[0]!, handled[1]!]);
    expect(adopted).toEqual(['a4', 'a5']);
    await waitFor(async () => (handled.length >= 5 ? true : undefined), 5_000, 'the handed-over jobs');
    expect(messages()).toEqual(['a1', 'a2', 'a3', 'a4', 'a5']);
    const { state, active } = await jobStates(database);
    expect(Object.fromEntries(state)).toEqual({
      msg_a1: 'completed',
      msg_a2: 'completed',
      msg_a3: 'active',
      msg_a4: 'active',
      msg_a5: 'active',
      msg_b1: 'created',
      msg_a6: 'created',
    });
    expect(active(hookA)).toBe(3);

    // a3's place: the first waiting job is B's, so nothing is handed over — a6 waits its turn
    // behind b1 (the loop's next fetch takes them).
    await record([handled[2]!]);
    expect(adopted).toEqual(['a4', 'a5']);
  }, 30_000);
});

/**
 * The delivery handler skips the webhook lookup for handed-over jobs only when the recording
 * statement saw the row version it keeps: a change to the webhook (here its URL) reaches the
 * deliveries claimed after it, even in the middle of a hand-off stream.
 */
describe('webhook delivery hand-off and webhook changes', () => {
  let jobQueue: TestJobQueue;
  let database: Database;
  let queue: JobQueue;
  let receiver: WebhookReceiver;

  beforeAll(async () => {
    jobQueue = await startTestJobQueue();
    ({ database, queue } = jobQueue);
    receiver = await startWebhookReceiver();
  });
  afterAll(async () => {
    await jobQueue?.close();
    await receiver?.close();
  });

  it('sends to the new URL every delivery claimed after the change', async () => {
    const { db } = database.handle;
    const config = loadConfig({
      ...process.env,
      DATABASE_URL: database.handle.connectionString,
      ENCRYPTION_KEY: ENCRYPTION_KEY.toString('base64'),
      BASE_URL: 'http://localhost:3000',
      WEBHOOKS_ALLOW_PRIVATE: 'true',
    });
    const teamId = newId('team');
    await db.insert(teams).values({ id: teamId, name: 'Changes', slug: `changes-${teamId}` });
    const hook = await createWebhook({ db, config, encryptionKey: ENCRYPTION_KEY }, teamId, {
      name: 'moving',
      url: receiver.url('/old'),
      events: ['email.sent'],
    });
    receiver.answer('/old', () => ({ delayMs: 20 }));
    receiver.answer('/new', () => ({ delayMs: 20 }));
    const cap = 2;
    // Counts the jobs handed over (the real adopt runs them).
    let adopted = 0;
    const adopt = queue.adopt.bind(queue);
    queue.adopt = (name, jobs) => {
      adopted += jobs.length;
      adopt(name, jobs);
    };
    await queue.consume<JobPayload<'webhook.deliver'>>(
      WEBHOOK_DELIVER_JOB,
      { maxInFlight: 10, batchSize: 10, groupConcurrency: cap, pollingIntervalMs: 50, retryLimit: 5 },
      createDeliverWebhookHandler({ db, queue, encryptionKey: ENCRYPTION_KEY, config }),
    );
    const total = 40;
    await enqueue(
      database,
      queue,
      Array.from({ length: total }, (_, i) => payload(teamId, hook.id, String(i))),
    );
    await waitFor(async () => (receiver.to('/old').length >= 8 ? true : undefined), 20_000, '8 deliveries');
    const sentBefore = receiver.to('/old').length;
    await webhookRepository.update(db, teamId, hook.id, { url: receiver.url('/new') });

    await waitFor(
      async () => (receiver.requests.length >= total ? true : undefined),
      30_000,
      'every delivery',
    );
    // After the change: at most the attempts in flight (the cap) and those a statement that began
    // before it handed over (the cap again) still went to the old URL.
    expect(receiver.to('/old').length).toBeLessThanOrEqual(sentBefore + 2 * cap);
    expect(receiver.to('/new').length).toBe(total - receiver.to('/old').length);
    expect(new Set(receiver.requests.map((r) => r.json?.label)).size).toBe(total);
    // The stream went through hand-offs (what this test is about), not fetches alone.
    expect(adopted).toBeGreaterThan(0);
    // Every job is completed once its attempt is recorded (after the receiver answered).
    await waitFor(
      async () => {
        const { rows } = await database.handle.pool.query<{ n: number }>(
          `select count(*)::int as n from pgboss.job where name = $1 and state = 'completed'`,
          [WEBHOOK_DELIVER_JOB],
        );
        return rows[0]!.n === total ? true : undefined;
      },
      10_000,
      'every job completed',
    );
    const [row] = await db.select().from(webhooks).where(eq(webhooks.id, hook.id));
    expect(row!.url).toBe(receiver.url('/new'));
  }, 60_000);
});

/**
 * A loop that is stopping takes no new jobs: the recording statement of its last attempts hands
 * nothing over, so stop() is not kept waiting by jobs claimed after it began.
 */
describe('webhook delivery hand-off while the worker stops', () => {
  let jobQueue: TestJobQueue;

  beforeAll(async () => {
    jobQueue = await startTestJobQueue();
  });
  afterAll(async () => {
    await jobQueue?.close();
  });

  it('hands nothing over once the loop is stopping', async () => {
    const { database, queue } = jobQueue;
    const teamId = newId('team');
    const webhookId = newId('webhook');
    await database.handle.db.insert(teams).values({ id: teamId, name: 'Stopping', slug: `stop-${teamId}` });
    await database.handle.db.insert(webhooks).values({
      id: webhookId,
      teamId,
      name: 'hook',
      url: 'https://receiver.example/hook',
      events: ['email.sent'],
      secretEncrypted: 'v2:unused',
    });
    // Cap 1: the loop claims s1, s2 waits.
    await enqueue(database, queue, [payload(teamId, webhookId, 's1'), payload(teamId, webhookId, 's2')]);
    const handled: ClaimedJob<JobPayload<'webhook.deliver'>>[] = [];
    await queue.consume<JobPayload<'webhook.deliver'>>(
      WEBHOOK_DELIVER_JOB,
      { maxInFlight: 10, batchSize: 10, groupConcurrency: 1, pollingIntervalMs: 60_000 },
      (jobs) =>
        jobs.map((job) => {
          handled.push(job);
          return new Promise<typeof SETTLED>(() => {});
        }),
    );
    await waitFor(async () => (handled.length >= 1 ? true : undefined), 10_000, 'the first fetch');
    const adopted: string[] = [];
    const adopt = queue.adopt.bind(queue);
    queue.adopt = (name, jobs) => {
      adopted.push(...jobs.map((job) => job.id));
      adopt(name, jobs);
    };

    // stop() marks the loop stopping at once, then waits for its held job (s1) to settle.
    const stopped = queue.stop(5_000);
    const recorder = new WebhookAttemptRecorder(database.handle.db, queue);
    await recorder.record({ outcome: attemptOutcome(handled[0]!.data), job: handled[0]! });

    expect(adopted).toEqual([]);
    const { state } = await jobStates(database);
    expect(Object.fromEntries(state)).toEqual({ msg_s1: 'completed', msg_s2: 'created' });
    await stopped;
  }, 30_000);
});
