import { sql } from 'drizzle-orm';
import { TypeID } from 'typeid-js';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { EMAIL_SEND_JOB } from '../src/jobs/definitions.ts';
import { createTestContext, type TestContext } from './helpers/app.ts';
import { dashboardCall, send } from './helpers/factories.ts';
import { createTeamWithKey } from './helpers/sending-team.ts';
import { startTestSmtpServer, type TestSmtpServer } from './helpers/smtp-server.ts';

/**
 * Issue #9 "Render once, outside the transaction; decide what the worker reuses": the accept path
 * renders before writing (to refuse what does not render, and for the log's subject) and the job
 * carries no HTML; the worker renders from the logged version and variables, which gives what the
 * log's re-render gives. A job that does carry the rendered email (queued by an earlier build) is
 * sent as it is.
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

  /** The message the SMTP server received for `address`, once it arrives. */
  const messageTo = (address: string) =>
    vi.waitFor(
      () => {
        const found = smtp.messages.find((m) => m.envelopeTo.includes(address));
        if (!found) throw new Error(`${address} has no message yet`);
        return found;
      },
      { timeout: 20_000, interval: 50 },
    );

  it('queues no rendered HTML with the job, only the log to render from', async () => {
    const { owner, key, templateId } = await newTeam();
    const response = await send(ctx.app, key, {
      templateId,
      to: 'queued@example.test',
      variables: { first_name: 'Zoë' },
    });
    expect(response.statusCode, response.body).toBe(202);
    const { id, jobId } = response.json().data;
    expect(await jobDataOf(jobId)).toEqual({ emailId: id, teamId: owner.teamId });
    const log = await dashboardCall(ctx.app, owner, 'GET', `/api/logs/${id}`);
    expect(log.json().data.subject).toBe('Hi Zoë');
  });

  it('sends what a re-render of the log gives; a job carrying the rendered email (earlier build) as it is', async () => {
    const { owner, key, templateId } = await newTeam();
    const first = await send(ctx.app, key, {
      templateId,
      to: 'a@example.test',
      variables: { first_name: 'Zoë' },
    });
    expect(first.statusCode, first.body).toBe(202);
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
    const fromJob = await messageTo('b@example.test');
    expect(fromJob.parsed.subject).toBe('Hi Q');
    expect(fromJob.parsed.html).toContain('From the job');
    expect(fromJob.parsed.text?.trim()).toBe('From the job');

    const rendered = await messageTo('a@example.test');
    const rerendered = (
      await dashboardCall(ctx.app, owner, 'GET', `/api/logs/${first.json().data.id}/rendered`)
    ).json().data;
    expect(rerendered.html).toContain('Hello Zoë');
    expect(rendered.parsed.subject).toBe(rerendered.subject);
    expect(rendered.parsed.html).toBe(rerendered.html);
    expect(rendered.parsed.text?.trim()).toBe(rerendered.text.trim());
  });
});
