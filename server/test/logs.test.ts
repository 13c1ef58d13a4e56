import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { LOG_READS_PER_TEAM, LOG_READS_WAITING_PER_TEAM } from '../src/modules/emails/log-read-slots.ts';
import { RESENDS_PER_MINUTE_PER_TEAM } from '../src/modules/emails/resend.service.ts';
import { createTestContext, type TestContext, waitFor } from './helpers/app.ts';
import { addTeamMember, sessionHeaders } from './helpers/auth.ts';
import { buildApiKey, buildSmtpAdapter, buildTemplate, expectError, send } from './helpers/factories.ts';
import { createTeamWithKey } from './helpers/sending-team.ts';
import { startTestSmtpServer, type TestSmtpServer } from './helpers/smtp-server.ts';

describe('email logs: stats and resend', () => {
  let ctx: TestContext;
  let smtp: TestSmtpServer;

  const get = (url: string, user: { cookie: string }) =>
    ctx.app.inject({ method: 'GET', url, headers: sessionHeaders(ctx.app, user) });
  const resend = (id: string, user: { cookie: string }) =>
    ctx.app.inject({ method: 'POST', url: `/api/logs/${id}/resend`, headers: sessionHeaders(ctx.app, user) });
  const settled = (id: string, user: { cookie: string }) =>
    waitFor(async () => {
      const log = (await get(`/api/logs/${id}`, user)).json().data;
      return ['sent', 'failed'].includes(log.status) ? log : undefined;
    }, 30_000);
  /** A team of this case's own, delivering to the file's SMTP server. */
  const newTeam = () => createTeamWithKey(ctx.app, { smtpPort: smtp.port, template: { name: 'Logs' } });

  beforeAll(async () => {
    ctx = await createTestContext('postgres', { SEND_RETRY_LIMIT: '0' });
    smtp = await startTestSmtpServer({
      onRcptTo(address, _session, callback) {
        if (address.address.startsWith('reject')) {
          return callback(Object.assign(new Error('No such user'), { responseCode: 550 }));
        }
        callback();
      },
    });
    await ctx.startWorkers();
  });
  afterAll(async () => {
    await ctx?.close();
    await smtp?.close();
  });

  it('counts emails by status, within a time range', async () => {
    const { owner, key, templateId } = await newTeam();
    const before = new Date().toISOString();
    const ok = (
      await send(ctx.app, key, { templateId, to: 'fine@example.test', variables: { first_name: 'A' } })
    ).json().data;
    const bad = (await send(ctx.app, key, { templateId, to: 'reject-1@example.test' })).json().data;
    expect((await settled(ok.id, owner)).status).toBe('sent');
    expect((await settled(bad.id, owner)).status).toBe('failed');
    const stats = await get(`/api/logs/stats?from=${encodeURIComponent(before)}`, owner);
    expect(stats.statusCode, stats.body).toBe(200);
    expect(stats.json().data).toEqual({
      total: 2,
      queued: 0,
      sent: 1,
      delivered: 0,
      opened: 0,
      clicked: 0,
      bounced: 0,
      failed: 1,
      spam: 0,
    });
    const future = new Date(Date.now() + 3_600_000).toISOString();
    expect((await get(`/api/logs/stats?from=${encodeURIComponent(future)}`, owner)).json().data.total).toBe(
      0,
    );
    expectError(await get('/api/logs/stats?from=yesterday', owner), 400, 'VALIDATION_ERROR');
    // A date alone is 00:00 UTC that day (review finding, session 14: ISO 8601 dates were refused).
    const today = before.slice(0, 10);
    const tomorrow = new Date(Date.parse(today) + 86_400_000).toISOString().slice(0, 10);
    expect((await get(`/api/logs/stats?from=${today}&to=${tomorrow}`, owner)).json().data.total).toBe(2);
    expect((await get(`/api/logs/stats?from=${tomorrow}`, owner)).json().data.total).toBe(0);
    const listed = await get(`/api/logs?from=${today}`, owner);
    expect(listed.statusCode, listed.body).toBe(200);
    expect(listed.json().data.items).toHaveLength(2);
    expectError(await get('/api/logs?to=2026-02-30', owner), 400, 'VALIDATION_ERROR');
    // As `to`, a date alone takes in the whole day (review finding, session 15: from=D&to=D found
    // nothing); instants out of 1970-9999 are a validation error, not the database's.
    expect((await get(`/api/logs/stats?from=${today}&to=${today}`, owner)).json().data.total).toBe(2);
    expect((await get(`/api/logs?from=${today}&to=${today}`, owner)).json().data.items).toHaveLength(2);
    for (const bound of [
      'from=0000-01-01',
      'to=9999-12-31T23:59:59-23:59',
      'from=0001-01-01T00:00:00%2B01:00',
    ]) {
      const error = expectError(await get(`/api/logs?${bound}`, owner), 400, 'VALIDATION_ERROR');
      expect(error.details.issues[0].path).toMatch(/^querystring\.(from|to)$/);
      expectError(await get(`/api/logs/stats?${bound}`, owner), 400, 'VALIDATION_ERROR');
    }
    // Every status timestamp is on the log, spamAt too.
    expect((await get(`/api/logs/${ok.id}`, owner)).json().data).toMatchObject({
      spamAt: null,
      failedAt: null,
    });
    const logsKey = (await buildApiKey(ctx.app, owner, { scopes: ['logs:read'] })).key;
    const byKey = await ctx.app.inject({
      method: 'GET',
      url: '/api/logs/stats',
      headers: { 'x-api-key': logsKey },
    });
    expect(byKey.json().data.total).toBe(2); // the team's only emails
  });

  it('runs at most a few log reads of one team at once: a flood of its searches is refused in part, another team reads on', async () => {
    // Review finding, session 15: 20 concurrent searches of one team's 200,000 logs held the whole
    // database pool for seconds, and another team's send waited 9 s to be accepted.
    const flooding = await newTeam();
    const other = await newTeam();
    const searches = await Promise.all(
      Array.from({ length: LOG_READS_PER_TEAM + LOG_READS_WAITING_PER_TEAM + 10 }, (_, i) =>
        get(`/api/logs?search=${'x'.repeat(150)}${i}`, flooding.owner),
      ),
    );
    const statuses = searches.map((response) => response.statusCode);
    expect(statuses.filter((status) => status === 200).length).toBeGreaterThanOrEqual(
      LOG_READS_PER_TEAM + LOG_READS_WAITING_PER_TEAM,
    );
    const refused = searches.filter((response) => response.statusCode === 429);
    expect(refused.length).toBeGreaterThan(0);
    expect(refused[0]!.json().error).toMatchObject({
      code: 'RATE_LIMITED',
      details: { retryAfterSeconds: 1 },
    });
    expect(refused[0]!.headers['retry-after']).toBe('1');
    expect(statuses.every((status) => status === 200 || status === 429)).toBe(true);
    const [mine, stats] = await Promise.all([
      get('/api/logs', other.owner),
      get('/api/logs/stats', other.owner),
    ]);
    expect(mine.statusCode).toBe(200);
    expect(stats.statusCode).toBe(200);
  });

  it('resends a failed email as a new queued email with the same recipients and variables', async () => {
    const { owner, key, templateId } = await newTeam();
    const failed = (
      await send(ctx.app, key, { templateId, to: 'reject-2@example.test', variables: { first_name: 'Zed' } })
    ).json().data;
    expect((await settled(failed.id, owner)).status).toBe('failed');
    const member = await addTeamMember(ctx.app, owner, 'member');
    const response = await resend(failed.id, member);
    expect(response.statusCode, response.body).toBe(202);
    const again = response.json().data;
    expect(again).toEqual({
      id: expect.stringMatching(/^eml_/),
      jobId: expect.stringMatching(/^job_/),
      status: 'queued',
    });
    expect(again.id).not.toBe(failed.id);
    const log = (await get(`/api/logs/${again.id}`, owner)).json().data;
    expect(log).toMatchObject({
      toAddresses: ['reject-2@example.test'],
      variables: { first_name: 'Zed' },
      templateId,
      apiKeyId: null,
    });
    expect(log.events[0]).toMatchObject({ status: 'queued', detail: { resendOf: failed.id } });
    expect((await get(`/api/logs/${failed.id}`, owner)).json().data.status).toBe('failed');
  });

  it('lets a team resend at most RESENDS_PER_MINUTE_PER_TEAM emails a minute (429 past it), other teams unaffected', async () => {
    // Review finding, session 15: each resend copies the original's attachments (up to 25 MiB) and
    // the original stays resendable: 40 concurrent resends grew the database by 416 MB in 1.5 s.
    const { owner, key, templateId } = await newTeam();
    const failed = (await send(ctx.app, key, { templateId, to: 'reject-many@example.test' })).json().data;
    expect((await settled(failed.id, owner)).status).toBe('failed');
    const responses = await Promise.all(
      Array.from({ length: RESENDS_PER_MINUTE_PER_TEAM + 5 }, () => resend(failed.id, owner)),
    );
    const statuses = responses.map((response) => response.statusCode);
    expect(statuses.filter((status) => status === 202)).toHaveLength(RESENDS_PER_MINUTE_PER_TEAM);
    const refused = responses.filter((response) => response.statusCode === 429);
    expect(refused).toHaveLength(5);
    expect(refused[0]!.json().error).toMatchObject({
      code: 'RATE_LIMITED',
      details: { limit: RESENDS_PER_MINUTE_PER_TEAM },
    });
    expect(Number(refused[0]!.headers['retry-after'])).toBeGreaterThanOrEqual(1);
    // A refused resend (not failed or bounced) spends none of the budget: checked before counting.
    const sent = (await send(ctx.app, key, { templateId, to: 'fine-2@example.test' })).json().data;
    expect((await settled(sent.id, owner)).status).toBe('sent');
    expectError(await resend(sent.id, owner), 400, 'VALIDATION_ERROR');
    const other = await newTeam();
    const otherFailed = (
      await send(ctx.app, other.key, { templateId: other.templateId, to: 'reject-3@example.test' })
    ).json().data;
    expect((await settled(otherFailed.id, other.owner)).status).toBe('failed');
    expect((await resend(otherFailed.id, other.owner)).statusCode).toBe(202);
  });

  it('a resend the send path refuses spends none of the budget', async () => {
    // Review finding, session 16: the budget was counted before the send was prepared, so 30
    // resends refused for an inactive template locked out a valid one for a minute.
    const { owner, key, templateId } = await newTeam();
    const failed = (await send(ctx.app, key, { templateId, to: 'reject-paused@example.test' })).json().data;
    expect((await settled(failed.id, owner)).status).toBe('failed');
    const toggle = (isActive: boolean) =>
      ctx.app.inject({
        method: 'PUT',
        url: `/api/templates/${templateId}`,
        headers: sessionHeaders(ctx.app, owner),
        payload: { isActive },
      });
    expect((await toggle(false)).statusCode).toBe(200);
    for (let i = 0; i < RESENDS_PER_MINUTE_PER_TEAM + 2; i++) {
      expectError(await resend(failed.id, owner), 400, 'INVALID_TEMPLATE');
    }
    expect((await toggle(true)).statusCode).toBe(200);
    expect((await resend(failed.id, owner)).statusCode).toBe(202);
  });

  it('refuses to resend an email that did not fail, or whose template was deleted', async () => {
    const { owner, key, templateId } = await newTeam();
    const sent = (await send(ctx.app, key, { templateId, to: 'fine2@example.test' })).json().data;
    expect((await settled(sent.id, owner)).status).toBe('sent');
    const notResendable = expectError(await resend(sent.id, owner), 400, 'VALIDATION_ERROR');
    expect(notResendable.details.reason).toBe('NOT_RESENDABLE');

    const doomed = await buildTemplate(ctx.app, owner, { name: 'Doomed' });
    const failed = (await send(ctx.app, key, { templateId: doomed.id, to: 'reject-3@example.test' })).json()
      .data;
    expect((await settled(failed.id, owner)).status).toBe('failed');
    await ctx.app.inject({
      method: 'DELETE',
      url: `/api/templates/${doomed.id}`,
      headers: sessionHeaders(ctx.app, owner),
    });
    const deleted = expectError(await resend(failed.id, owner), 400, 'VALIDATION_ERROR');
    expect(deleted.details.reason).toBe('TEMPLATE_DELETED');

    const viewer = await addTeamMember(ctx.app, owner, 'viewer');
    expectError(await resend(failed.id, viewer), 403, 'FORBIDDEN');
    expectError(await resend('eml_unknown', owner), 404, 'NOT_FOUND');
  });

  it('resends through the team’s sending adapter when the one the email named was deleted or deactivated since', async () => {
    // Review finding, session 18: refused with UNKNOWN_ADAPTER / ADAPTER_DISABLED at `body.adapterId`,
    // a field the resend has no body for; such an email could never be resent.
    const { owner, key, templateId, adapterId: teamAdapterId } = await newTeam();
    for (const change of ['delete', 'deactivate'] as const) {
      const named = await buildSmtpAdapter(ctx.app, owner, smtp.port, { name: `Named ${change}` });
      const failed = (
        await send(ctx.app, key, { templateId, to: `reject-${change}@example.test`, adapterId: named.id })
      ).json().data;
      expect((await settled(failed.id, owner)).status).toBe('failed');
      const changed = await ctx.app.inject({
        method: change === 'delete' ? 'DELETE' : 'PUT',
        url: `/api/adapters/${named.id}`,
        headers: sessionHeaders(ctx.app, owner),
        ...(change === 'deactivate' ? { payload: { isActive: false } } : {}),
      });
      expect(changed.statusCode, changed.body).toBe(200);
      const response = await resend(failed.id, owner);
      expect(response.statusCode, response.body).toBe(202);
      const log = (await get(`/api/logs/${response.json().data.id}`, owner)).json().data;
      expect(log).toMatchObject({ toAddresses: [`reject-${change}@example.test`], adapterId: teamAdapterId });
    }
  });
});
