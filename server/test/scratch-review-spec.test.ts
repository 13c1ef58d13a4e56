import { writeFileSync } from 'node:fs';
import { sql } from 'drizzle-orm';
import { afterAll, beforeAll, describe, it } from 'vitest';
import { createTestContext, type TestContext } from './helpers/app.ts';
import { addTeamMember, sessionHeaders } from './helpers/auth.ts';
import { simpleDesign } from './helpers/factories.ts';
import { createTeamWithKey } from './helpers/sending-team.ts';

const out: Record<string, unknown> = {};

describe('scratch spec probe', () => {
  let ctx: TestContext;
  beforeAll(async () => {
    ctx = await createTestContext('postgres');
  });
  afterAll(async () => {
    writeFileSync('/tmp/specrev/probe.json', JSON.stringify(out, null, 1));
    await ctx?.close();
  });

  it('probes', async () => {
    const app = ctx.app;
    const db = app.ctx.database.db;
    const team = await createTeamWithKey(app);
    const other = await createTeamWithKey(app);
    const owner = team.owner;
    type M = 'GET' | 'POST' | 'PUT' | 'DELETE';
    const rec = (
      label: string,
      r: { statusCode: number; body: string; headers: Record<string, unknown> },
    ) => {
      let body: unknown = r.body;
      try {
        body = JSON.parse(r.body);
      } catch {}
      out[label] = { status: r.statusCode, body };
      return body as any;
    };
    const as = (
      user: { cookie: string },
      method: M,
      url: string,
      payload?: unknown,
      extra: Record<string, string> = {},
    ) =>
      app.inject({
        method,
        url,
        headers: { ...sessionHeaders(app, user), ...extra },
        ...(payload !== undefined ? { payload: payload as object } : {}),
      });
    const key = (k: string, method: M, url: string, payload?: unknown) =>
      app.inject({
        method,
        url,
        headers: { 'x-api-key': k },
        ...(payload !== undefined ? { payload: payload as object } : {}),
      });

    // API keys
    const created = rec('key.create', await as(owner, 'POST', '/api/api-keys', { name: 'k1' }));
    rec('key.create.10001', await as(owner, 'POST', '/api/api-keys', { name: 'k2', rateLimit: 10001 }));
    rec('key.create.0', await as(owner, 'POST', '/api/api-keys', { name: 'k2', rateLimit: 0 }));
    rec('key.create.emptyscopes', await as(owner, 'POST', '/api/api-keys', { name: 'k2', scopes: [] }));
    rec(
      'key.create.dateonly',
      await as(owner, 'POST', '/api/api-keys', { name: 'k2', expiresAt: '2099-01-01' }),
    );
    rec(
      'key.create.nooffset',
      await as(owner, 'POST', '/api/api-keys', { name: 'k2', expiresAt: '2099-01-01T00:00:00' }),
    );
    rec('key.list', await as(owner, 'GET', '/api/api-keys'));
    rec('key.get', await as(owner, 'GET', `/api/api-keys/${created.data.id}`));
    rec(
      'key.update',
      await as(owner, 'PUT', `/api/api-keys/${created.data.id}`, { name: 'k1b', rateLimit: 5 }),
    );
    const regen = rec('key.regen', await as(owner, 'POST', `/api/api-keys/${created.data.id}/regenerate`));
    rec('key.old-secret', await key(created.data.key, 'GET', '/api/v1/eml_x/status'));
    rec('key.new-secret-status-unknown', await key(regen.data.key, 'GET', '/api/v1/eml_x/status'));
    rec('key.other-team-get', await as(other.owner, 'GET', `/api/api-keys/${created.data.id}`));
    rec('nokey', await app.inject({ method: 'GET', url: '/api/v1/eml_x/status' }));
    rec('badkey', await key('svc_nope', 'GET', '/api/v1/eml_x/status'));
    rec('badkey-noprefix', await key('abc', 'GET', '/api/v1/eml_x/status'));
    rec('session-on-public', await as(owner, 'GET', '/api/v1/eml_x/status'));
    const exp = rec('key.create.exp', await as(owner, 'POST', '/api/api-keys', { name: 'exp' }));
    await db.execute(
      sql`update api_keys set expires_at = now() - interval '1 minute' where id = ${exp.data.id}`,
    );
    rec('key.expired', await key(exp.data.key, 'GET', '/api/v1/eml_x/status'));
    const inact = rec('key.create.inact', await as(owner, 'POST', '/api/api-keys', { name: 'in' }));
    rec('key.deactivate', await as(owner, 'PUT', `/api/api-keys/${inact.data.id}`, { isActive: false }));
    rec('key.inactive', await key(inact.data.key, 'GET', '/api/v1/eml_x/status'));
    const rl = rec('key.create.rl', await as(owner, 'POST', '/api/api-keys', { name: 'rl', rateLimit: 1 }));
    await key(rl.data.key, 'GET', '/api/v1/eml_x/status');
    const r429 = await key(rl.data.key, 'GET', '/api/v1/eml_x/status');
    rec('key.ratelimited', r429);
    out['key.ratelimited.headers'] = r429.headers;
    const tr = rec(
      'key.create.tr',
      await as(owner, 'POST', '/api/api-keys', { name: 'tr', scopes: ['templates:read'] }),
    );
    rec(
      'key.tr.send',
      await key(tr.data.key, 'POST', '/api/v1/send', { templateId: team.templateId, to: 'a@example.com' }),
    );
    rec('key.tr.templates', await key(tr.data.key, 'GET', '/api/templates'));
    rec('key.tr.logs', await key(tr.data.key, 'GET', '/api/logs'));
    rec('key.delete', await as(owner, 'DELETE', `/api/api-keys/${rl.data.id}`));

    // adapters
    rec('adp.types', await as(owner, 'GET', '/api/adapters/types'));
    rec('adp.list', await as(owner, 'GET', '/api/adapters'));
    rec('adp.get', await as(owner, 'GET', `/api/adapters/${team.adapterId}`));
    const a2 = rec(
      'adp.create',
      await as(owner, 'POST', '/api/adapters', {
        name: 'mg',
        type: 'mailapi_domain',
        config: { apiKey: 'k', domain: 'mg.example.com' },
      }),
    );
    rec('adp.get.mg', await as(owner, 'GET', `/api/adapters/${a2.data.id}`));
    rec(
      'adp.create.ses-badregion',
      await as(owner, 'POST', '/api/adapters', {
        name: 'ses',
        type: 'mailapi_cloud',
        config: { accessKeyId: 'a', secretAccessKey: 'b', region: 'us-east-2' },
      }),
    );
    rec(
      'adp.create.smtp-noport',
      await as(owner, 'POST', '/api/adapters', { name: 's', type: 'smtp', config: { host: 'x' } }),
    );
    rec(
      'adp.create.badtype',
      await as(owner, 'POST', '/api/adapters', { name: 's', type: 'mailgun', config: {} }),
    );
    rec(
      'adp.update',
      await as(owner, 'PUT', `/api/adapters/${a2.data.id}`, { name: 'mg2', isDefault: true }),
    );
    rec('adp.list2', await as(owner, 'GET', '/api/adapters'));
    rec('adp.test', await as(owner, 'POST', `/api/adapters/${team.adapterId}/test`));
    rec('adp.delete', await as(owner, 'DELETE', `/api/adapters/${a2.data.id}`));
    const member = await addTeamMember(app, { teamId: owner.teamId }, 'member');
    const viewer = await addTeamMember(app, { teamId: owner.teamId }, 'viewer');
    rec('adp.member.list', await as(member, 'GET', '/api/adapters'));
    rec('adp.member.get', await as(member, 'GET', `/api/adapters/${team.adapterId}`));
    rec('adp.viewer.types', await as(viewer, 'GET', '/api/adapters/types'));

    // templates
    rec('tpl.list', await as(owner, 'GET', '/api/templates'));
    rec('tpl.list.ps101', await as(owner, 'GET', '/api/templates?pageSize=101'));
    rec('tpl.list.p0', await as(owner, 'GET', '/api/templates?page=0'));
    rec('tpl.list.isActive1', await as(owner, 'GET', '/api/templates?isActive=1'));
    rec('tpl.list.searchslug', await as(owner, 'GET', `/api/templates?search=${team.template.slug}`));
    rec('tpl.get.slug', await as(owner, 'GET', `/api/templates/${team.template.slug}`));
    const t2 = rec(
      'tpl.create',
      await as(owner, 'POST', '/api/templates', {
        name: 'Second',
        subject: 'S {{ x }}',
        designJson: simpleDesign(),
        description: 'd',
        generatePdf: false,
        pdfFilename: 'f.pdf',
      }),
    );
    rec('tpl.create.nodesign', await as(owner, 'POST', '/api/templates', { name: 'X', subject: 'S' }));
    rec(
      'tpl.create.dupslug',
      await as(owner, 'POST', '/api/templates', {
        name: 'X',
        subject: 'S',
        slug: t2.data.slug,
        designJson: simpleDesign(),
      }),
    );
    rec(
      'tpl.create.desc501',
      await as(owner, 'POST', '/api/templates', {
        name: 'X',
        subject: 'S',
        designJson: simpleDesign(),
        description: 'x'.repeat(501),
      }),
    );
    rec(
      'tpl.update.slug',
      await as(owner, 'PUT', `/api/templates/${t2.data.slug}`, { subject: 'New {{ y }}', isActive: false }),
    );
    rec('tpl.list.inactive', await as(owner, 'GET', '/api/templates?isActive=false'));
    rec('tpl.dup', await as(owner, 'POST', `/api/templates/${t2.data.id}/duplicate`));
    rec('tpl.versions.create.nobody', await as(owner, 'POST', `/api/templates/${t2.data.id}/versions`));
    const v = rec(
      'tpl.versions.create',
      await as(owner, 'POST', `/api/templates/${t2.data.id}/versions`, { name: 'named' }),
    );
    rec('tpl.versions.list', await as(owner, 'GET', `/api/templates/${t2.data.id}/versions`));
    rec(
      'tpl.versions.restore',
      await as(owner, 'PUT', `/api/templates/${t2.data.id}/versions/${v.data.id}/restore`),
    );
    rec(
      'tpl.preview',
      await as(owner, 'POST', `/api/templates/${t2.data.id}/preview`, { variables: { x: 1 } }),
    );
    rec('tpl.preview.novars', await as(owner, 'POST', `/api/templates/${t2.data.id}/preview`, {}));
    rec('tpl.preview.nobody', await as(owner, 'POST', `/api/templates/${t2.data.id}/preview`));
    rec(
      'tpl.viewer.create',
      await as(viewer, 'POST', '/api/templates', { name: 'X', subject: 'S', designJson: simpleDesign() }),
    );
    rec('tpl.viewer.list', await as(viewer, 'GET', '/api/templates'));
    rec('tpl.member.delete', await as(member, 'DELETE', `/api/templates/${t2.data.id}`));
    rec('tpl.other.get', await as(other.owner, 'GET', `/api/templates/${t2.data.id}`));

    // send
    const s = rec(
      'send',
      await key(team.key, 'POST', '/api/v1/send', {
        templateId: team.templateId,
        to: 'rcpt@example.com',
        variables: { first_name: 'A' },
      }),
    );
    rec(
      'send.slug',
      await key(team.key, 'POST', '/api/v1/send', { templateId: team.template.slug, to: 'rcpt@example.com' }),
    );
    rec(
      'send.badtemplate',
      await key(team.key, 'POST', '/api/v1/send', { templateId: 'tpl_nope', to: 'rcpt@example.com' }),
    );
    rec(
      'send.inactivetemplate',
      await key(team.key, 'POST', '/api/v1/send', { templateId: t2.data.id, to: 'rcpt@example.com' }),
    );
    rec(
      'send.otherteamtemplate',
      await key(team.key, 'POST', '/api/v1/send', { templateId: other.templateId, to: 'rcpt@example.com' }),
    );
    rec(
      'send.pdf',
      await key(team.key, 'POST', '/api/v1/send', {
        templateId: team.templateId,
        to: 'rcpt@example.com',
        pdfAttachments: [{ templateId: team.templateId, filename: 'a.pdf' }],
      }),
    );
    rec('send.noto', await key(team.key, 'POST', '/api/v1/send', { templateId: team.templateId }));
    rec(
      'send.badto',
      await key(team.key, 'POST', '/api/v1/send', { templateId: team.templateId, to: 'not-an-address' }),
    );
    rec('status', await key(team.key, 'GET', `/api/v1/${s.data.id}/status`));
    rec('status.otherteam', await key(other.key, 'GET', `/api/v1/${s.data.id}/status`));

    // logs
    rec('logs.list', await as(owner, 'GET', '/api/logs'));
    rec('logs.search.to', await as(owner, 'GET', '/api/logs?search=rcpt@'));
    rec('logs.search.subject', await as(owner, 'GET', '/api/logs?search=Hi'));
    rec('logs.badstatus', await as(owner, 'GET', '/api/logs?status=nope'));
    rec('logs.get', await as(owner, 'GET', `/api/logs/${s.data.id}`));
    rec('logs.stats', await as(owner, 'GET', '/api/logs/stats'));
    rec('logs.resend.queued', await as(owner, 'POST', `/api/logs/${s.data.id}/resend`));
    await db.execute(
      sql`update email_logs set status = 'failed', failed_at = now(), error_message = 'x' where id = ${s.data.id}`,
    );
    rec('logs.resend.failed', await as(owner, 'POST', `/api/logs/${s.data.id}/resend`));
    rec('logs.viewer.resend', await as(viewer, 'POST', `/api/logs/${s.data.id}/resend`));
    rec('logs.other', await as(other.owner, 'GET', `/api/logs/${s.data.id}`));
    rec('tpl.delete', await as(owner, 'DELETE', `/api/templates/${team.templateId}`));
    rec('logs.resend.tpldeleted', await as(owner, 'POST', `/api/logs/${s.data.id}/resend`));
    rec('logs.get.after-tpl-delete', await as(owner, 'GET', `/api/logs/${s.data.id}`));

    // webhooks
    const w = rec(
      'whk.create',
      await as(owner, 'POST', '/api/webhooks', {
        name: 'w',
        url: 'https://example.com/hook',
        events: ['email.sent'],
      }),
    );
    rec(
      'whk.create.badevent',
      await as(owner, 'POST', '/api/webhooks', {
        name: 'w',
        url: 'https://example.com/hook',
        events: ['email.nope'],
      }),
    );
    rec(
      'whk.create.noevents',
      await as(owner, 'POST', '/api/webhooks', { name: 'w', url: 'https://example.com/hook' }),
    );
    rec('whk.list', await as(owner, 'GET', '/api/webhooks'));
    rec('whk.get', await as(owner, 'GET', `/api/webhooks/${w.data.id}`));
    rec('whk.update', await as(owner, 'PUT', `/api/webhooks/${w.data.id}`, { isActive: false }));
    rec('whk.deliveries', await as(owner, 'GET', `/api/webhooks/${w.data.id}/deliveries`));
    rec('whk.member.list', await as(member, 'GET', '/api/webhooks'));
    rec('whk.delete', await as(owner, 'DELETE', `/api/webhooks/${w.data.id}`));
    rec('notfound', await app.inject({ method: 'GET', url: '/api/nope' }));
    rec(
      'text-body',
      await app.inject({
        method: 'POST',
        url: '/api/api-keys',
        headers: { ...sessionHeaders(app, owner), 'content-type': 'text/plain' },
        payload: 'x',
      }),
    );
  }, 60_000);
});
