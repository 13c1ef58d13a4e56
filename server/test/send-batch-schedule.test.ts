import { sql } from 'drizzle-orm';
import { TypeID } from 'typeid-js';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { createTestContext, type TestContext, waitFor } from './helpers/app.ts';
import type { TeamOwner } from './helpers/auth.ts';
import { dashboardCall, dataOf, expectError, send } from './helpers/factories.ts';
import { createTeamWithKey } from './helpers/sending-team.ts';
import { startTestSmtpServer, type TestSmtpServer } from './helpers/smtp-server.ts';

/** Issue #10: POST /api/v1/send/batch, `scheduledAt` and POST /api/v1/:id/cancel. */
describe('batch send, schedule and cancel', () => {
  let ctx: TestContext;
  let smtp: TestSmtpServer;
  let owner: TeamOwner;
  let apiKey: string;
  let templateId: string;

  beforeAll(async () => {
    ctx = await createTestContext('postgres');
    smtp = await startTestSmtpServer();
    await ctx.startWorkers();
  });
  // Every case gets a team of its own (CONVENTIONS.md): key, adapter (the file's SMTP sink) and
  // a template with the subject "Hi {{ first_name }}". The app, database and sink are the file's.
  beforeEach(async () => {
    ({ owner, key: apiKey, templateId } = await createTeamWithKey(ctx.app, { smtpPort: smtp.port }));
  });
  afterAll(async () => {
    await ctx?.close();
    await smtp?.close();
  });

  const query = async <T>(statement: ReturnType<typeof sql>) =>
    ((await ctx.app.ctx.database.db.execute(statement)) as unknown as { rows: T[] }).rows;

  const batch = (emails: unknown[]) =>
    ctx.app.inject({
      method: 'POST',
      url: '/api/v1/send/batch',
      headers: { 'x-api-key': apiKey },
      payload: { emails },
    });

  const cancel = (id: string) =>
    ctx.app.inject({ method: 'POST', url: `/api/v1/${id}/cancel`, headers: { 'x-api-key': apiKey } });

  const logOf = async (id: string) => dataOf(await dashboardCall(ctx.app, owner, 'GET', `/api/logs/${id}`));

  it('answers one result per item in order; the valid ones are accepted in one transaction and sent', async () => {
    const response = await batch([
      { templateId, to: 'b1@example.test', variables: { first_name: 'One' } },
      { templateId, to: 'not an address' },
      { templateId: 'no-such-template', to: 'b3@example.test' },
      {
        templateId,
        to: 'b4@example.test',
        cc: 'b4cc@example.test',
        subject: 'Four {{ first_name }}',
        variables: { first_name: 'Ada' },
      },
      { templateId, to: 'b5@example.test', headers: { From: 'x@example.test' } },
    ]);
    expect(response.statusCode, response.body).toBe(202);
    const { results } = response.json().data;
    expect(results).toHaveLength(5);
    expect(results[0]).toEqual({
      id: expect.stringMatching(/^eml_/),
      jobId: expect.stringMatching(/^job_/),
      status: 'queued',
    });
    expect(results[1].error).toMatchObject({
      code: 'VALIDATION_ERROR',
      details: { issues: [{ path: 'body.emails.1.to' }] },
    });
    expect(results[2].error).toMatchObject({ code: 'INVALID_TEMPLATE' });
    expect(results[3]).toMatchObject({ status: 'queued' });
    expect(results[4].error.code).toBe('VALIDATION_ERROR');
    expect(results[4].error.details.issues[0].path).toBe('body.emails.4.headers.From');

    // One transaction: both logs carry its now().
    const created = await query<{ created_at: string }>(
      sql`select distinct created_at::text from email_logs where id in (${results[0].id}, ${results[3].id})`,
    );
    expect(created).toHaveLength(1);

    const [one, four] = await Promise.all([
      waitFor(async () => smtp.messages.find((m) => m.envelopeTo.includes('b1@example.test'))),
      waitFor(async () => smtp.messages.find((m) => m.envelopeTo.includes('b4@example.test'))),
    ]);
    expect(one.parsed.subject).toBe('Hi One');
    expect(four.parsed.subject).toBe('Four Ada');
    expect(four.envelopeTo.sort()).toEqual(['b4@example.test', 'b4cc@example.test']);
    expect(smtp.messages.some((m) => m.envelopeTo.includes('b3@example.test'))).toBe(false);
  });

  it('refuses an empty batch and one of more than 100 emails', async () => {
    expectError(await batch([]), 400, 'VALIDATION_ERROR');
    expectError(await batch(Array(101).fill({ templateId, to: 'x@example.test' })), 400, 'VALIDATION_ERROR');
  });

  it('accepts 100 emails in one call', async () => {
    const emails = Array.from({ length: 100 }, (_, i) => ({ templateId, to: `hundred${i}@example.test` }));
    const response = await batch(emails);
    expect(response.statusCode, response.body).toBe(202);
    const results = response.json().data.results as { status?: string }[];
    expect(results.filter((r) => r.status === 'queued')).toHaveLength(100);
  });

  it('keeps a scheduled email queued until scheduledAt, then sends it', async () => {
    const scheduledAt = new Date(Date.now() + 2_500);
    const response = await send(ctx.app, apiKey, {
      templateId,
      to: 'later@example.test',
      scheduledAt: scheduledAt.toISOString(),
    });
    expect(response.statusCode, response.body).toBe(202);
    const { id, jobId } = response.json().data;
    const [job] = await query<{ start_after: string; keep_until: string }>(
      sql`select start_after::text, keep_until::text from pgboss.job where id = ${uuidOf(jobId)}::uuid`,
    );
    expect(Math.abs(Date.parse(job!.start_after) - scheduledAt.getTime())).toBeLessThan(1_000);
    await new Promise((resolve) => setTimeout(resolve, 1_000));
    expect((await logOf(id)).status).toBe('queued');
    expect(smtp.messages.some((m) => m.envelopeTo.includes('later@example.test'))).toBe(false);
    const message = await waitFor(
      async () => smtp.messages.find((m) => m.envelopeTo.includes('later@example.test')),
      30_000,
    );
    expect(Date.now()).toBeGreaterThanOrEqual(scheduledAt.getTime());
    expect(message.parsed.headers.get('x-postwright-email-id')).toBe(id);
    expect((await logOf(id)).scheduledAt).toBe(scheduledAt.toISOString());
  });

  it('keeps a job scheduled 30 days ahead past pg-boss’s 14-day retention', async () => {
    const scheduledAt = new Date(Date.now() + 29 * 86_400_000);
    const response = await send(ctx.app, apiKey, {
      templateId,
      to: 'month@example.test',
      scheduledAt: scheduledAt.toISOString(),
    });
    expect(response.statusCode, response.body).toBe(202);
    const [job] = await query<{ keep_until: string }>(
      sql`select keep_until::text from pgboss.job where id = ${uuidOf(response.json().data.jobId)}::uuid`,
    );
    expect(Date.parse(job!.keep_until)).toBeGreaterThan(scheduledAt.getTime());
  });

  it('sends an email scheduled in the past now, its job kept like an unscheduled one (not deleted by pg-boss before it runs)', async () => {
    // pg-boss keeps a job that has not run until its startAfter plus its retention: a scheduledAt
    // of 1970 passed on as startAfter let its maintenance delete the job, and the email stayed
    // queued for good (review finding, session 15).
    for (const scheduledAt of [
      '1970-01-01T00:00:00Z',
      new Date(Date.now() - 40 * 86_400_000).toISOString(),
    ]) {
      const response = await send(ctx.app, apiKey, { templateId, to: 'past@example.test', scheduledAt });
      expect(response.statusCode, response.body).toBe(202);
      const [job] = await query<{ keep_until: string; start_after: string }>(
        sql`select keep_until::text, start_after::text from pgboss.job where id = ${uuidOf(response.json().data.jobId)}::uuid`,
      );
      expect(Date.parse(job!.keep_until)).toBeGreaterThan(Date.now() + 86_400_000);
      expect(Date.parse(job!.start_after)).toBeGreaterThan(Date.now() - 60_000);
      await waitFor(async () => (await logOf(response.json().data.id)).status === 'sent');
    }
  });

  it('cancels a queued email: failed with "cancelled", its job cancelled with it, never sent', async () => {
    const response = await send(ctx.app, apiKey, {
      templateId,
      to: 'cancelled@example.test',
      scheduledAt: new Date(Date.now() + 1_500).toISOString(),
    });
    expect(response.statusCode, response.body).toBe(202);
    const { id, jobId } = response.json().data;
    const cancelled = await cancel(id);
    expect(cancelled.statusCode, cancelled.body).toBe(200);
    expect(cancelled.json().data).toEqual({ id, status: 'failed' });
    const log = await logOf(id);
    expect(log).toMatchObject({ status: 'failed', errorMessage: 'cancelled' });

    // Its job was cancelled in the same transaction: past its time, nothing ran or was sent.
    const jobState = async () =>
      (
        await query<{ state: string }>(
          sql`select state::text from pgboss.job where id = ${uuidOf(jobId)}::uuid`,
        )
      )[0]?.state;
    expect(await jobState()).toBe('cancelled');
    await new Promise((resolve) => setTimeout(resolve, 2_500));
    expect(await jobState()).toBe('cancelled');
    expect(smtp.messages.some((m) => m.envelopeTo.includes('cancelled@example.test'))).toBe(false);
    expect((await logOf(id)).status).toBe('failed');

    const again = expectError(await cancel(id), 400, 'VALIDATION_ERROR');
    expect(again.details.reason).toBe('NOT_CANCELLABLE');
    expectError(await cancel('eml_01jd0000000000000000000000'), 404, 'NOT_FOUND');
  });

  it('refuses to cancel an email whose send a worker has claimed (it may already be at its provider)', async () => {
    const response = await send(ctx.app, apiKey, {
      templateId,
      to: 'claimed@example.test',
      scheduledAt: new Date(Date.now() + 60_000).toISOString(),
    });
    expect(response.statusCode, response.body).toBe(202);
    const { id, jobId } = response.json().data;
    // A worker's claim, as pg-boss makes it (the job active, held by that worker).
    await query(
      sql`update pgboss.job set state = 'active', started_on = now() where id = ${uuidOf(jobId)}::uuid`,
    );
    const refused = expectError(await cancel(id), 400, 'VALIDATION_ERROR');
    expect(refused.details).toMatchObject({ reason: 'NOT_CANCELLABLE', status: 'sending' });
    expect((await logOf(id)).status).toBe('queued');
    const [job] = await query<{ state: string }>(
      sql`select state::text from pgboss.job where id = ${uuidOf(jobId)}::uuid`,
    );
    expect(job!.state).toBe('active');
    // Leave nothing claimed behind for the other cases' workers.
    await query(sql`update pgboss.job set state = 'cancelled' where id = ${uuidOf(jobId)}::uuid`);
  });
});

/** The pg-boss UUID of a `job_…` TypeID. */
function uuidOf(jobId: string): string {
  return TypeID.fromString(jobId).toUUID();
}
