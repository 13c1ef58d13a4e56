import { sql } from 'drizzle-orm';
import { TypeID } from 'typeid-js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { EMAIL_SEND_JOB } from '../src/jobs/definitions.ts';
import { createTestContext, type TestContext } from './helpers/app.ts';
import { setupOwner, type TeamOwner } from './helpers/auth.ts';
import { buildApiKey, buildSmtpAdapter, buildTemplate, dashboardCall, send } from './helpers/factories.ts';
import { startTestSmtpServer, type TestSmtpServer } from './helpers/smtp-server.ts';

/**
 * Issue #9 "Render once": the accept path renders outside any transaction and the job carries the
 * HTML, which the worker sends without rendering again; the worker derives the text part from it.
 */
describe('send: rendered once, at accept (PostgreSQL)', () => {
  let ctx: TestContext;
  let smtp: TestSmtpServer;
  let owner: TeamOwner;
  let key: string;
  let templateId: string;

  beforeAll(async () => {
    ctx = await createTestContext('postgres');
    smtp = await startTestSmtpServer();
    owner = await setupOwner(ctx.app);
    key = (await buildApiKey(ctx.app, owner)).key;
    await buildSmtpAdapter(ctx.app, owner, smtp.port);
    templateId = (await buildTemplate(ctx.app, owner, { name: 'Once', subject: 'Hi {{ first_name }}' })).id;
  });
  afterAll(async () => {
    await ctx?.close();
    await smtp?.close();
  });

  const jobDataOf = async (jobId: string) => {
    const result = (await ctx.app.ctx.database.db.execute(
      sql`select data from pgboss.job where name = ${EMAIL_SEND_JOB} and id = ${TypeID.fromString(jobId).toUUID()}::uuid`,
    )) as unknown as { rows: { data: { rendered?: { html: string; text?: string } } }[] };
    return result.rows[0]!.data;
  };

  it('queues the rendered HTML (no text part) with the job, equal to a re-render of the log', async () => {
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
    expect(data.rendered).toEqual({ html: rerendered.json().data.html });
    expect(data.rendered!.html).toContain('Hello Zoë');
  });

  it('delivers the HTML the job carries without rendering again, its text part derived from it', async () => {
    const response = await send(ctx.app, key, {
      templateId,
      to: 'b@example.test',
      variables: { first_name: 'Q' },
    });
    const { jobId } = response.json().data;
    // Only the job's copy is changed: a worker that rendered again would send "Hello Q".
    await setRendered(jobId, { html: '<p>From the <b>job</b></p>' });
    // A job queued with a text part (as before the worker derived it) is sent with that text.
    const withText = await send(ctx.app, key, { templateId, to: 'c@example.test', variables: {} });
    await setRendered(withText.json().data.jobId, { html: '<p>Html</p>', text: 'Queued text' });
    await ctx.startWorkers();
    const messages = await smtp.waitForMessages(3);
    const delivered = messages.find((m) => m.envelopeTo.includes('b@example.test'))!;
    expect(delivered.parsed.subject).toBe('Hi Q');
    expect(delivered.parsed.html).toContain('From the <b>job</b>');
    expect(delivered.parsed.text?.trim()).toBe('From the job');
    const queuedText = messages.find((m) => m.envelopeTo.includes('c@example.test'))!;
    expect(queuedText.parsed.text?.trim()).toBe('Queued text');
  });

  const setRendered = async (jobId: string, rendered: { html: string; text?: string }) => {
    await ctx.app.ctx.database.db.execute(
      sql`update pgboss.job set data = jsonb_set(data, '{rendered}', ${JSON.stringify(rendered)}::jsonb) where name = ${EMAIL_SEND_JOB} and id = ${TypeID.fromString(jobId).toUUID()}::uuid`,
    );
  };
});
