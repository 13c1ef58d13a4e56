import { sql } from 'drizzle-orm';
import { TypeID } from 'typeid-js';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { EMAIL_SEND_JOB } from '../src/jobs/definitions.ts';
import { createTestContext, type TestContext } from './helpers/app.ts';
import { dashboardCall, send } from './helpers/factories.ts';
import { createTeamWithKey } from './helpers/sending-team.ts';
import { startTestSmtpServer, type TestSmtpServer } from './helpers/smtp-server.ts';

/**
 * Issue #9 "Render once": the accept path renders outside any transaction and the job carries the
 * HTML and text part, which the worker sends without rendering again.
 */
describe('send: rendered once, at accept (PostgreSQL)', () => {
  let ctx: TestContext;
  let smtp: TestSmtpServer;

  beforeAll(async () => {
    ctx = await createTestContext('postgres');
    smtp = await startTestSmtpServer();
  });
  afterAll(async () => {
    await ctx?.close();
    await smtp?.close();
  });

  const jobDataOf = async (jobId: string) => {
    const result = (await ctx.app.ctx.database.db.execute(
      sql`select data from pgboss.job where name = ${EMAIL_SEND_JOB} and id = ${TypeID.fromString(jobId).toUUID()}::uuid`,
    )) as unknown as { rows: { data: { rendered?: { html: string; text: string } } }[] };
    return result.rows[0]!.data;
  };

  /** A team of the case's own delivering to the file's SMTP server. */
  const newTeam = () =>
    createTeamWithKey(ctx.app, {
      smtpPort: smtp.port,
      template: { name: 'Once', subject: 'Hi {{ first_name }}' },
    });

  it('queues the rendered HTML and text with the job, equal to a re-render of the log', async () => {
    const { owner, key, templateId } = await newTeam();
    const response = await send(ctx.app, key, {
      templateId,
      to: 'a@example.test',
      variables: { first_name: 'Zoë' },
    });
    expect(response.statusCode, response.body).toBe(202);
    const { id, jobId } = response.json().data;
    const data = await jobDataOf(jobId);
    const rerendered = await dashboardCall(ctx.app, owner, 'GET', `/api/logs/${id}/rendered`);
    expect(rerendered.statusCode, rerendered.body).toBe(200);
    expect(data.rendered).toEqual({ html: rerendered.json().data.html, text: rerendered.json().data.text });
    expect(data.rendered!.html).toContain('Hello Zoë');
  });

  it('delivers the HTML and text the job carries without rendering again', async () => {
    const { key, templateId } = await newTeam();
    const response = await send(ctx.app, key, {
      templateId,
      to: 'b@example.test',
      variables: { first_name: 'Q' },
    });
    const { jobId } = response.json().data;
    // Only the job's copy is changed: a worker that rendered again would send "Hello Q".
    await ctx.app.ctx.database.db.execute(
      sql`update pgboss.job set data = jsonb_set(data, '{rendered}', ${JSON.stringify({
        html: '<p>From the job</p>',
        text: 'From the job',
      })}::jsonb) where name = ${EMAIL_SEND_JOB} and id = ${TypeID.fromString(jobId).toUUID()}::uuid`,
    );
    await ctx.startWorkers();
    const delivered = await vi.waitFor(
      () => {
        const found = smtp.messages.find((m) => m.envelopeTo.includes('b@example.test'));
        if (!found) throw new Error('b@example.test has no message yet');
        return found;
      },
      { timeout: 20_000, interval: 50 },
    );
    expect(delivered.parsed.subject).toBe('Hi Q');
    expect(delivered.parsed.html).toContain('From the job');
    expect(delivered.parsed.text?.trim()).toBe('From the job');
  });
});
