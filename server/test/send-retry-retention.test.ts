import { sql } from 'drizzle-orm';
import { TypeID } from 'typeid-js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { SEND_RETRY_DELAY_MAX_SECONDS } from '../src/jobs/definitions.ts';
import { declareQueues } from '../src/jobs/registry.ts';
import { createTestContext, type TestContext, waitFor } from './helpers/app.ts';
import { send } from './helpers/factories.ts';
import { createTeamWithKey, type SendingTeam } from './helpers/sending-team.ts';

/**
 * Review finding (time 1): pg-boss deletes a job still waiting past its `keep_until` (14 days after
 * it was enqueued), and a retry does not move `keep_until`. Uncapped, the backoff of the longest
 * retry policy config.ts allows put a retry past it, and the email, deleted with its job, stayed
 * `queued` for ever. Sends now wait at most SEND_RETRY_DELAY_MAX_SECONDS between attempts.
 */
describe('send retries stay within their job retention', () => {
  let ctx: TestContext;
  let team: SendingTeam;

  beforeAll(async () => {
    // The longest retry policy config.ts allows.
    ctx = await createTestContext('postgres', { SEND_RETRY_LIMIT: '20', SEND_RETRY_DELAY_SECONDS: '3600' });
    await ctx.startWorkers();
    // Its adapter's SMTP port has nothing listening: every attempt fails with a transient error.
    team = await createTeamWithKey(ctx.app);
  });
  afterAll(async () => {
    await ctx?.close();
  });

  const query = async <T>(statement: ReturnType<typeof sql>) =>
    ((await ctx.app.ctx.database.db.execute(statement)) as unknown as { rows: T[] }).rows;

  interface JobTimes {
    state: string;
    retry_count: number;
    /** Seconds from now until its next attempt. */
    wait_s: number;
    /** Seconds from its next attempt until pg-boss may delete it. */
    margin_s: number;
    /** Seconds from its creation until pg-boss may delete it. */
    retention_s: number;
  }
  const jobTimes = async (uuid: string) =>
    (
      await query<JobTimes>(
        sql`select state::text, retry_count,
            extract(epoch from start_after - now())::float8 as wait_s,
            extract(epoch from keep_until - start_after)::float8 as margin_s,
            extract(epoch from keep_until - created_on)::float8 as retention_s
          from pgboss.job where id = ${uuid}::uuid`,
      )
    )[0];

  it('an email failing again and again waits at most 6 h for each retry, all of them within its retention', async () => {
    const response = await send(ctx.app, team.key, { templateId: team.templateId, to: 'retry@example.test' });
    expect(response.statusCode, response.body).toBe(202);
    const uuid = TypeID.fromString(response.json().data.jobId).toUUID();
    const first = await waitFor(
      async () => {
        const job = await jobTimes(uuid);
        return job?.state === 'retry' ? job : undefined;
      },
      30_000,
      'the first retry',
    );
    // The first wait is SEND_RETRY_DELAY_SECONDS with pg-boss's jitter (× 1-2), under the cap.
    expect(first.wait_s).toBeGreaterThan(3600 - 60);
    expect(first.wait_s).toBeLessThanOrEqual(2 * 3600);
    // The waits of all 20 retries, each at most the cap, fit in its retention with days to spare.
    expect(20 * SEND_RETRY_DELAY_MAX_SECONDS).toBeLessThan(first.retention_s / 2);

    // As if it had been retried `n` times already (without the cap: waits of 21 days and up, then
    // years); pg-boss counts the claim of a retry (retry_count + 1), so retry 19 is the last that
    // fails into another retry (the 20th, whose failure is final).
    for (const n of [9, 15, 18]) {
      await query(
        sql`update pgboss.job set retry_count = ${n}, start_after = now() where id = ${uuid}::uuid`,
      );
      const job = await waitFor(
        async () => {
          const times = await jobTimes(uuid);
          return times?.state === 'retry' && times.retry_count === n + 1 ? times : undefined;
        },
        30_000,
        `retry ${n + 1}`,
      );
      // Its backoff is far past the cap, so the wait is the cap (a few seconds have passed since).
      expect(job.wait_s, `wait after attempt ${n + 1}`).toBeLessThanOrEqual(SEND_RETRY_DELAY_MAX_SECONDS);
      expect(job.wait_s).toBeGreaterThan(SEND_RETRY_DELAY_MAX_SECONDS - 60);
      expect(job.margin_s, `retry ${n + 1} lies within keep_until`).toBeGreaterThan(0);
    }
  });

  it('an existing queue declared without the cap gets it at the next start, and so do its new jobs', async () => {
    const capOf = async () =>
      Object.fromEntries(
        (
          await query<{ name: string; cap: number | null }>(
            sql`select name, retry_delay_max as cap from pgboss.queue
              where name in ('email.send', 'invitation.send', 'template.thumbnail')`,
          )
        ).map((row) => [row.name, row.cap]),
      );
    // An installation whose queues were created before the cap existed.
    await query(sql`update pgboss.queue set retry_delay_max = null`);
    expect(await capOf()).toEqual({
      'email.send': null,
      'invitation.send': null,
      'template.thumbnail': null,
    });

    await declareQueues(ctx.queue, ctx.config);
    expect(await capOf()).toEqual({
      'email.send': SEND_RETRY_DELAY_MAX_SECONDS,
      'invitation.send': SEND_RETRY_DELAY_MAX_SECONDS,
      'template.thumbnail': null,
    });
    const response = await send(ctx.app, team.key, { templateId: team.templateId, to: 'later@example.test' });
    expect(response.statusCode, response.body).toBe(202);
    const uuid = TypeID.fromString(response.json().data.jobId).toUUID();
    const [job] = await query<{ cap: number | null }>(
      sql`select retry_delay_max as cap from pgboss.job where id = ${uuid}::uuid`,
    );
    expect(job?.cap).toBe(SEND_RETRY_DELAY_MAX_SECONDS);
  });
});
