import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestContext, type TestContext, waitFor } from './helpers/app.ts';
import { sessionHeaders } from './helpers/auth.ts';
import type { DatabaseKind } from './helpers/database.ts';
import { emailStatus, fixtureNames, loadFixture, prependToFirstText, send } from './helpers/factories.ts';
import { createTeamWithKey } from './helpers/sending-team.ts';
import { startTestSmtpServer, type TestSmtpServer } from './helpers/smtp-server.ts';

describe.each<DatabaseKind>(['postgres'])('send end to end on %s', (kind) => {
  let ctx: TestContext;
  let smtp: TestSmtpServer;

  // One app, database and SMTP sink per file; every case sends from a team of its own.
  beforeAll(async () => {
    ctx = await createTestContext(kind);
    smtp = await startTestSmtpServer();
    await ctx.startWorkers();
  });

  afterAll(async () => {
    await ctx?.close();
    await smtp?.close();
  });

  it.each(fixtureNames())('delivers the %s fixture with its variables over real SMTP', async (fixture) => {
    const design = prependToFirstText(loadFixture(fixture), 'Dear {{ first_name }}, ');
    const {
      owner,
      key: apiKey,
      template,
    } = await createTeamWithKey(ctx.app, {
      smtpPort: smtp.port,
      template: {
        name: `Fixture ${fixture}`,
        subject: `${fixture} for {{ first_name }}`,
        designJson: design,
      },
    });
    const recipient = `${fixture}@example.test`;
    const response = await send(ctx.app, apiKey, {
      templateId: template.slug,
      to: recipient,
      variables: { first_name: 'Ada' },
    });
    expect(response.statusCode, response.body).toBe(202);
    const accepted = response.json().data;
    expect(accepted).toEqual({
      id: expect.stringMatching(/^eml_/),
      jobId: expect.stringMatching(/^job_/),
      status: 'queued',
    });

    const message = await waitFor(
      async () => smtp.messages.find((m) => m.envelopeTo.includes(recipient)),
      60_000,
      `the ${fixture} message`,
    );
    const mail = message.parsed;
    expect(mail.subject).toBe(`${fixture} for Ada`);
    expect(mail.from?.value[0]).toMatchObject({ address: 'sender@postwright.test', name: 'Postwright Test' });
    expect(mail.to && !Array.isArray(mail.to) ? mail.to.value.map((v) => v.address) : []).toEqual([
      recipient,
    ]);
    expect(mail.html).toContain('Dear Ada, ');
    expect(mail.html).not.toContain('{{');
    expect(mail.text).toContain('Dear Ada,');
    expect(mail.headers.get('x-postwright-email-id')).toBe(accepted.id);

    const status = await waitFor(async () => {
      const s = await emailStatus(ctx.app, apiKey, accepted.id);
      return s.status === 'sent' ? s : undefined;
    }, 60_000);
    expect(status).toEqual({
      id: accepted.id,
      status: 'sent',
      sentAt: expect.any(String),
      hasPdfAttachment: false,
    });
    expect(status.sentAt).toMatch(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/);

    const log = await ctx.app.inject({
      method: 'GET',
      url: `/api/logs/${accepted.id}`,
      headers: sessionHeaders(ctx.app, owner),
    });
    expect(log.statusCode, log.body).toBe(200);
    expect(log.json().data).toMatchObject({
      id: accepted.id,
      teamId: owner.teamId,
      templateId: template.id,
      templateName: `Fixture ${fixture}`,
      templateVersionId: expect.stringMatching(/^ver_/),
      toAddresses: [recipient],
      fromAddress: 'Postwright Test <sender@postwright.test>',
      subject: `${fixture} for Ada`,
      variables: { first_name: 'Ada' },
      status: 'sent',
      providerMessageId: expect.any(String),
      errorMessage: null,
      jobId: accepted.jobId,
    });
    expect(log.json().data.events.map((e: { status: string }) => e.status)).toEqual(['queued', 'sent']);
  });

  it('sends one email to a list of recipients', async () => {
    const { key, templateId } = await createTeamWithKey(ctx.app, { smtpPort: smtp.port });
    const to = ['one@example.test', 'Two Person <two@example.test>'];
    const response = await send(ctx.app, key, {
      templateId,
      to,
      variables: { first_name: 'Bo' },
    });
    expect(response.statusCode, response.body).toBe(202);
    const message = await waitFor(async () =>
      smtp.messages.find((m) => m.envelopeTo.includes('two@example.test')),
    );
    expect(message.envelopeTo.sort()).toEqual(['one@example.test', 'two@example.test']);
    expect(message.parsed.subject).toBe('Hi Bo');
  });

  it('lists logs with the spec list fields, filtered by status and search', async () => {
    // Its own team: the counts below see this case's email only.
    const { owner, key, templateId } = await createTeamWithKey(ctx.app, { smtpPort: smtp.port });
    const recipient = 'listed@example.test';
    const { id } = (await send(ctx.app, key, { templateId, to: recipient })).json().data;
    await waitFor(async () => ((await emailStatus(ctx.app, key, id)).status === 'sent' ? true : undefined));
    const list = (query: string) =>
      ctx.app.inject({ method: 'GET', url: `/api/logs?${query}`, headers: sessionHeaders(ctx.app, owner) });
    const response = await list(`search=${encodeURIComponent(recipient)}&pageSize=5`);
    expect(response.statusCode, response.body).toBe(200);
    const data = response.json().data;
    expect(data).toMatchObject({ total: 1, page: 1, pageSize: 5, totalPages: 1 });
    expect(data.items[0]).toMatchObject({ id, status: 'sent', toAddresses: [recipient] });
    expect(Object.keys(data.items[0]).sort()).toEqual(
      ['createdAt', 'id', 'sentAt', 'status', 'subject', 'templateId', 'templateName', 'toAddresses'].sort(),
    );
    expect((await list('pageSize=5')).json().data.total).toBe(1); // the team's only email
    const sent = (await list(`status=sent&search=${encodeURIComponent(recipient)}`)).json().data;
    expect(sent.total).toBe(1);
    const failed = (await list(`status=failed&search=${encodeURIComponent(recipient)}`)).json().data;
    expect(failed.total).toBe(0);
  });
});
