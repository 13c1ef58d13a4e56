import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestContext, TEST_BASE_URL, type TestContext, waitFor } from './helpers/app.ts';
import { addTeamMember, cookieHeaderFrom, freePort, setupOwner } from './helpers/auth.ts';
import {
  buildApiKey,
  buildSmtpAdapter,
  buildTemplate,
  dashboardCall,
  dataOf,
  send,
} from './helpers/factories.ts';
import { cliEnvOn, startCli } from './helpers/process.ts';
import { acceptInvitation, buildInvitation, inviteeEmail, tokenOf } from './helpers/teams.ts';
import { PNG_1X1, uploadImage } from './helpers/uploads.ts';

/**
 * Review finding (integrity 1): any signed-in user can create a team of their own, and nothing
 * deletes a team or lets anyone else own it; `postwright delete-user` refused the only owner of a
 * team, so one `POST /api/teams` made an account (e.g. one squatting an address through an
 * invitation link) undeletable. The teams whose only member is the user now go with the user, with
 * all they hold, their stored files and their queued jobs ending cleanly; the only owner of a team
 * with other members is still refused.
 */
describe('postwright delete-user and the teams the user is the only member of', () => {
  let ctx: TestContext;
  // The app's storage and the CLI's are one: DATA_DIR/files, served under BASE_URL/files.
  const dataDir = mkdtempSync(path.join(tmpdir(), 'postwright-delete-user-'));
  beforeAll(async () => {
    ctx = await createTestContext('postgres', { DATA_DIR: dataDir });
  });
  afterAll(async () => {
    await ctx?.close();
    rmSync(dataDir, { recursive: true, force: true });
  });

  const run = async (email: string) => {
    const cli = startCli(
      ['delete-user', email],
      cliEnvOn(ctx.app.ctx.database.connectionString, { DATA_DIR: dataDir, BASE_URL: TEST_BASE_URL }),
    );
    const code = await new Promise<number | null>((resolve) => cli.child.once('exit', resolve));
    return { code, output: cli.output() };
  };
  const query = async <T>(text: string, values: unknown[] = []) =>
    (await ctx.app.ctx.database.pool.query(text, values)).rows as T[];
  /** Rows of team `teamId` in every table with a `team_id` column, by table (tables with none left out). */
  const rowsOfTeam = async (teamId: string) => {
    const tables = await query<{ table_name: string }>(
      `select table_name from information_schema.columns
       where table_schema = 'public' and column_name = 'team_id' order by table_name`,
    );
    const counts: Record<string, number> = {};
    for (const { table_name: table } of tables) {
      const [row] = await query<{ n: number }>(
        `select count(*)::int as n from "${table}" where team_id = $1`,
        [teamId],
      );
      if (row!.n > 0) counts[table] = row!.n;
    }
    return counts;
  };
  /** Creates a team as `user` (POST /api/teams) and makes it the session's active team. */
  const createOwnTeam = async (user: { cookie: string }, name: string) => {
    const team = await dataOf(await dashboardCall(ctx.app, user, 'POST', '/api/teams', { name }), 201);
    const switched = await dashboardCall(ctx.app, user, 'POST', '/api/auth/switch-team', { teamId: team.id });
    expect(switched.statusCode, switched.body).toBe(200);
    const cookie = cookieHeaderFrom(switched);
    return { teamId: team.id as string, user: { ...user, cookie: cookie || user.cookie } };
  };

  it('deletes the teams whose only member the user is, with all they hold, their files and queued jobs', async () => {
    const company = await setupOwner(ctx.app);
    // The review's case: an address taken through an invitation link shown to its sender.
    const victim = inviteeEmail('victim').toLowerCase();
    const squat = await buildInvitation(ctx.app, company, { email: victim, role: 'viewer' });
    const taken = await acceptInvitation(ctx.app, tokenOf(squat.url), {
      body: { name: 'Squatter', password: 'squatter-password' },
    });
    expect(taken.statusCode, taken.body).toBe(201);
    const mine = await createOwnTeam({ cookie: cookieHeaderFrom(taken) }, 'Mine');
    const squatter = mine.user;

    // Everything a team holds: adapter, key, template (and version), a webhook with a recorded
    // attempt, a queued email with its history, send options, attachment and idempotency record,
    // a suppression, an uploaded image, a thumbnail, and an invitation whose email is queued.
    const adapter = await buildSmtpAdapter(ctx.app, squatter, await freePort());
    const template = await buildTemplate(ctx.app, squatter);
    const { key } = await buildApiKey(ctx.app, squatter);
    const webhook = await dataOf(
      await dashboardCall(ctx.app, squatter, 'POST', '/api/webhooks', {
        name: 'hook',
        url: `http://localhost:${await freePort()}/hook`,
        events: ['email.queued', 'email.sent'],
      }),
      201,
    );
    await dataOf(await dashboardCall(ctx.app, squatter, 'POST', `/api/webhooks/${webhook.id}/test`));
    const sent = await ctx.app.inject({
      method: 'POST',
      url: '/api/v1/send',
      headers: { 'x-api-key': key, 'idempotency-key': 'delete-user-own-teams' },
      payload: {
        templateId: template.id,
        to: 'someone@example.test',
        cc: ['copy@example.test'],
        tags: { campaign: 'spring' },
        attachments: [{ filename: 'a.txt', content: 'YQ==' }],
      },
    });
    expect(sent.statusCode, sent.body).toBe(202);
    await dataOf(
      await dashboardCall(ctx.app, squatter, 'POST', '/api/suppressions', {
        address: 'suppressed@example.test',
        reason: 'test',
      }),
      201,
    );
    const upload = await uploadImage(ctx.app, squatter, { filename: 'a.png', bytes: PNG_1X1 });
    expect(upload.statusCode, upload.body).toBe(201);
    const uploadKey: string = upload.json().data.key;
    // A thumbnail as the thumbnail job leaves it: the file in storage, its URL on the template.
    const { storage } = ctx.app.ctx;
    const thumbnailKey = `${mine.teamId}/thumbnails/${template.id}-0123456789abcdef.png`;
    await storage.put(thumbnailKey, PNG_1X1, 'image/png');
    await query('update templates set thumbnail_url = $1 where id = $2', [
      storage.publicUrl(thumbnailKey),
      template.id,
    ]);
    const invited = await buildInvitation(ctx.app, squatter, { email: inviteeEmail('friend') });
    expect(invited.url).toBeUndefined();

    const before = await rowsOfTeam(mine.teamId);
    for (const table of [
      'adapters',
      'api_keys',
      'templates',
      'template_versions',
      'email_logs',
      'email_events',
      'email_send_options',
      'email_attachments',
      'idempotency_keys',
      'webhooks',
      'webhook_deliveries',
      'suppressions',
      'uploads',
      'invitations',
      'members',
    ])
      expect(before[table], `${table} of the team before`).toBeGreaterThan(0);
    const jobs = () =>
      query<{ name: string; state: string }>(
        `select name, state::text as state from pgboss.job where data->>'teamId' = $1 order by name`,
        [mine.teamId],
      );
    expect((await jobs()).map((job) => job.name)).toEqual(['email.send', 'invitation.send']);
    expect(await storage.get(uploadKey)).toBeDefined();

    const deleted = await run(victim);
    expect(deleted.code, deleted.output).toBe(0);
    expect(deleted.output).toContain(`Deleted ${victim}`);
    expect(deleted.output).toContain('removed from 1 team(s)');
    expect(deleted.output).toContain(`Deleted team "Mine" (${mine.teamId}) with everything in it`);
    expect(deleted.output).toContain('Storage: removed 2 file(s) of the deleted team(s).');

    // Nothing of the team is left: no row in any table with a team_id, nor the team, nor its files.
    expect(await rowsOfTeam(mine.teamId)).toEqual({});
    expect(await query('select id from teams where id = $1', [mine.teamId])).toEqual([]);
    expect(await query('select id from users where lower(email) = $1', [victim])).toEqual([]);
    expect(await query('select 1 from webhook_outbox where webhook_id = $1', [webhook.id])).toEqual([]);
    expect(await query('select 1 from provider_event_tokens where adapter_id = $1', [adapter.id])).toEqual(
      [],
    );
    expect(await storage.get(uploadKey)).toBeUndefined();
    expect(await storage.get(thumbnailKey)).toBeUndefined();
    // The team the user only belonged to keeps its owner and everything else.
    expect(await query('select id from teams where id = $1', [company.teamId])).toHaveLength(1);
    expect(
      await query<{ user_id: string }>('select user_id from members where team_id = $1', [company.teamId]),
    ).toEqual([{ user_id: company.userId }]);

    // The team's API key no longer sends (this process may still hold it for a few seconds: then
    // the template is gone), and never with a server error.
    const late = await send(ctx.app, key, { templateId: template.id, to: 'someone@example.test' });
    expect([400, 401], late.body).toContain(late.statusCode);

    // Its queued jobs, whose rows are gone, end as completed when a worker takes them (no retries).
    await ctx.startWorkers();
    const settled = await waitFor(
      async () => {
        const states = await jobs();
        return states.every((job) => job.state === 'completed') ? states : undefined;
      },
      30_000,
      'the deleted team’s jobs to complete',
    );
    expect(settled.map((job) => job.name)).toEqual(['email.send', 'invitation.send']);
  }, 120_000);

  it('still refuses the only owner of a team with other members, deleting nothing', async () => {
    const owner = await setupOwner(ctx.app);
    await addTeamMember(ctx.app, owner, 'member');
    const solo = await createOwnTeam(owner, 'Solo');
    const upload = await uploadImage(ctx.app, solo.user, { filename: 'a.png', bytes: PNG_1X1 });
    expect(upload.statusCode, upload.body).toBe(201);
    const before = await rowsOfTeam(solo.teamId);

    const refused = await run(owner.email);
    expect(refused.code, refused.output).toBe(1);
    expect(refused.output).toMatch(/^Not deleted: .* is the only owner of: Team [0-9a-f]+\.$/m);
    expect(refused.output).not.toContain('Solo');
    expect(await query('select id from users where id = $1', [owner.userId])).toHaveLength(1);
    expect(await rowsOfTeam(solo.teamId)).toEqual(before);
    expect(await query('select id from teams where id = $1', [solo.teamId])).toHaveLength(1);
    expect(await ctx.app.ctx.storage.get(upload.json().data.key)).toBeDefined();
  }, 120_000);
});
