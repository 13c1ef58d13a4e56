import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestContext, type TestContext, waitFor } from './helpers/app.ts';
import { addTeamMember, sessionHeaders } from './helpers/auth.ts';
import { buildSmtpAdapter, buildTemplate, dashboardCall, dataOf, expectError } from './helpers/factories.ts';
import { createTeamWithKey } from './helpers/sending-team.ts';
import { startTestSmtpServer, type TestSmtpServer } from './helpers/smtp-server.ts';

/**
 * `POST /api/templates/:id/send-test` (issue #13, the preview's "send test email to yourself"):
 * the template goes through the real send path (log, job, worker, SMTP) to the signed-in user's own
 * address, never to a caller-chosen one; another team's template is 404, a role without
 * logs:resend 403, an API key 401.
 */
describe('template test send', () => {
  let ctx: TestContext;
  let smtp: TestSmtpServer;

  beforeAll(async () => {
    ctx = await createTestContext('postgres');
    smtp = await startTestSmtpServer();
    await ctx.startWorkers();
  });
  afterAll(async () => {
    await ctx?.close();
    await smtp?.close();
  });

  it("delivers the current version, rendered with the variables, to the caller's own address only", async () => {
    const team = await createTeamWithKey(ctx.app, { smtpPort: smtp.port });
    const member = await addTeamMember(ctx.app, team.owner, 'member');
    const url = `/api/templates/${team.template.slug}/send-test`;
    const response = await dashboardCall(ctx.app, member, 'POST', url, {
      variables: { first_name: 'Grace' },
      // Not a field of this endpoint: stripped, so no third party can be addressed.
      to: 'stranger@example.test',
    });
    const accepted = await dataOf(response, 202);
    expect(accepted).toEqual({
      id: expect.stringMatching(/^eml_/),
      jobId: expect.stringMatching(/^job_/),
      status: 'queued',
    });

    const message = await waitFor(
      async () => smtp.messages.find((m) => m.parsed.headers.get('x-postwright-email-id') === accepted.id),
      60_000,
      'the test email',
    );
    expect(message.envelopeTo).toEqual([member.email]);
    expect(message.parsed.subject).toBe('Hi Grace');
    expect(message.parsed.html).toContain('Hello Grace');
    expect(smtp.messages.some((m) => m.envelopeTo.includes('stranger@example.test'))).toBe(false);

    // The log the page links to: the team's, from no API key, marked as a test.
    const log = await dataOf(await dashboardCall(ctx.app, team.owner, 'GET', `/api/logs/${accepted.id}`));
    expect(log).toMatchObject({ toAddresses: [member.email], templateId: team.template.id, apiKeyId: null });
    expect(log.metadata).toEqual({ testSend: 'true', requestedBy: member.userId });
  });

  it('sends through the named adapter and refuses what the send API refuses', async () => {
    const team = await createTeamWithKey(ctx.app); // default adapter: a closed port
    const other = await buildSmtpAdapter(ctx.app, team.owner, smtp.port, {
      name: 'Second',
      isDefault: false,
    });
    const url = `/api/templates/${team.template.id}/send-test`;
    const accepted = await dataOf(
      await dashboardCall(ctx.app, team.owner, 'POST', url, { adapterId: other.id }),
      202,
    );
    const message = await waitFor(
      async () => smtp.messages.find((m) => m.parsed.headers.get('x-postwright-email-id') === accepted.id),
      60_000,
      'the test email through the named adapter',
    );
    expect(message.envelopeTo).toEqual([team.owner.email]);
    // No variables: rendered with {}.
    expect(message.parsed.subject).toBe('Hi');

    expectError(
      await dashboardCall(ctx.app, team.owner, 'POST', url, { adapterId: 'adp_missing' }),
      400,
      'VALIDATION_ERROR',
    );
    // Review finding, session 16: text PostgreSQL cannot store is the send API's VALIDATION_ERROR.
    for (const variables of [{ first_name: '\ud800' }, { first_name: 'a\u0000b' }]) {
      const error = expectError(
        await dashboardCall(ctx.app, team.owner, 'POST', url, { variables }),
        400,
        'VALIDATION_ERROR',
      );
      expect(error.details.issues.map((i: { path: string }) => i.path)).toContain(
        'body.variables.first_name',
      );
    }
    const inactive = await buildTemplate(ctx.app, team.owner, { name: 'Paused' });
    await dataOf(
      await dashboardCall(ctx.app, team.owner, 'PUT', `/api/templates/${inactive.id}`, { isActive: false }),
    );
    expectError(
      await dashboardCall(ctx.app, team.owner, 'POST', `/api/templates/${inactive.id}/send-test`, {}),
      400,
      'INVALID_TEMPLATE',
    );
  });

  it('answers NO_ACTIVE_ADAPTER as the send API does when the team has no adapter', async () => {
    const team = await createTeamWithKey(ctx.app);
    await dataOf(await dashboardCall(ctx.app, team.owner, 'DELETE', `/api/adapters/${team.adapterId}`));
    const error = expectError(
      await dashboardCall(ctx.app, team.owner, 'POST', `/api/templates/${team.template.id}/send-test`, {}),
      400,
      'VALIDATION_ERROR',
    );
    expect(error.details.reason).toBe('NO_ACTIVE_ADAPTER');
  });

  it("refuses another team's template (404), a viewer (403) and an API key (401)", async () => {
    const team = await createTeamWithKey(ctx.app, { smtpPort: smtp.port });
    const stranger = await createTeamWithKey(ctx.app, { smtpPort: smtp.port });
    const url = `/api/templates/${team.template.id}/send-test`;
    const before = smtp.messages.length;

    expectError(await dashboardCall(ctx.app, stranger.owner, 'POST', url, {}), 404, 'NOT_FOUND');
    const viewer = await addTeamMember(ctx.app, team.owner, 'viewer');
    expectError(await dashboardCall(ctx.app, viewer, 'POST', url, {}), 403, 'FORBIDDEN');
    const byKey = await ctx.app.inject({
      method: 'POST',
      url,
      headers: { ...sessionHeaders(ctx.app, { cookie: '' }), 'x-api-key': team.key },
      payload: {},
    });
    expectError(byKey, 401, 'UNAUTHORIZED');

    const logs = await dataOf(await dashboardCall(ctx.app, team.owner, 'GET', '/api/logs'));
    expect(logs.items).toEqual([]);
    expect(smtp.messages.length).toBe(before);
  });
});
