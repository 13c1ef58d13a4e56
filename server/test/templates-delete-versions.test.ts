import { sql } from 'drizzle-orm';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { newId } from '../src/ids.ts';
import { createTestContext, type TestContext, waitFor } from './helpers/app.ts';
import { dashboardCall, dataOf, send, simpleDesign } from './helpers/factories.ts';
import { createTeamWithKey, type SendingTeam } from './helpers/sending-team.ts';

/**
 * Review finding "growth": deleting a template deletes its versions that no email log names (no
 * API reached them any more, up to 2 MB of design each); the versions a log names stay, so the log
 * still re-renders. No workers: a log is written, and re-renders, at accept.
 */

let ctx: TestContext;

beforeAll(async () => {
  ctx = await createTestContext('postgres');
});
afterAll(async () => {
  await ctx?.close();
});

type Method = 'GET' | 'POST' | 'PUT' | 'DELETE';
const call = (team: SendingTeam, method: Method, url: string, payload?: object) =>
  dashboardCall(ctx.app, team.owner, method, url, payload);

/** Edits the template's text, then saves a version of it by hand; the new version's id. */
async function saveVersion(team: SendingTeam, templateId: string, text: string): Promise<string> {
  await dataOf(await call(team, 'PUT', `/api/templates/${templateId}`, { designJson: simpleDesign(text) }));
  return (await dataOf(await call(team, 'POST', `/api/templates/${templateId}/versions`, {}), 201)).id;
}

/** Which of `ids` still exist in template_versions. */
async function versionsLeft(ids: string[]): Promise<string[]> {
  const result = (await ctx.context.db.execute(
    sql`select id from template_versions where id in ${ids} order by id`,
  )) as unknown as { rows: { id: string }[] };
  return result.rows.map((row) => row.id);
}

async function sendWith(team: SendingTeam, templateId: string): Promise<string> {
  const response = await send(ctx.app, team.key, {
    templateId,
    to: 'ada@example.test',
    variables: { first_name: 'Ada' },
  });
  expect(response.statusCode, response.body).toBe(202);
  return response.json().data.id;
}

async function versionIds(team: SendingTeam, templateId: string): Promise<string[]> {
  return (await dataOf(await call(team, 'GET', `/api/templates/${templateId}/versions`))).map(
    (version: { id: string }) => version.id,
  );
}

describe('deleting a template', () => {
  it('deletes the versions no log names and keeps the ones a log names: those logs still re-render', async () => {
    const team = await createTeamWithKey(ctx.app);
    const { templateId } = team;
    const [first] = await versionIds(team, templateId);
    const sent = await saveVersion(team, templateId, 'Sent text for {{ first_name }}');
    const emailId = await sendWith(team, templateId);
    const rendered = await dataOf(await call(team, 'GET', `/api/logs/${emailId}/rendered`));
    expect(rendered.html).toContain('Sent text for Ada');
    const draft = await saveVersion(team, templateId, 'A draft never sent');
    const log = await dataOf(await call(team, 'GET', `/api/logs/${emailId}`));
    expect(log.templateVersionId).toBe(sent);

    const removed = await call(team, 'DELETE', `/api/templates/${templateId}`);
    expect(removed.statusCode, removed.body).toBe(200);

    expect(await versionsLeft([first!, sent, draft])).toEqual([sent]);
    expect(await dataOf(await call(team, 'GET', `/api/logs/${emailId}/rendered`))).toEqual(rendered);
  });

  it('deletes every version of a template that was never sent', async () => {
    const team = await createTeamWithKey(ctx.app);
    const ids = [
      ...(await versionIds(team, team.templateId)),
      await saveVersion(team, team.templateId, 'Second'),
      await saveVersion(team, team.templateId, 'Third'),
    ];
    expect(ids).toHaveLength(3);
    expect((await call(team, 'DELETE', `/api/templates/${team.templateId}`)).statusCode).toBe(200);
    expect(await versionsLeft(ids)).toEqual([]);
  });

  it('keeps the version of a send that commits while the delete runs (the delete waits for it)', async () => {
    const team = await createTeamWithKey(ctx.app);
    const { templateId } = team;
    const version = await saveVersion(team, templateId, 'Racing text for {{ first_name }}');
    const emailId = newId('emailLog');
    // A send's accept transaction, not committed yet: its log's foreign key check holds the
    // template row (KEY SHARE) until it commits.
    const client = await ctx.context.database.pool.connect();
    try {
      await client.query('begin');
      await client.query(
        `insert into email_logs (id, team_id, template_id, template_name, template_version_id, adapter_id,
          to_addresses, from_address, subject, variables, status, job_id)
         values ($1, $2, $3, 'Welcome', $4, $5, '{ada@example.test}', 'sender@postwright.test', 'Hi Ada',
          '{"first_name":"Ada"}', 'queued', 'job')`,
        [emailId, team.owner.teamId, templateId, version, team.adapterId],
      );
      const removing = call(team, 'DELETE', `/api/templates/${templateId}`);
      // The delete is waiting for the send's lock on the template row.
      await waitFor(
        async () => {
          const waiting = (await ctx.context.db.execute(sql`select count(*)::int as n from pg_stat_activity
            where datname = current_database() and wait_event_type = 'Lock'`)) as unknown as {
            rows: { n: number }[];
          };
          return waiting.rows[0]!.n > 0 ? true : undefined;
        },
        20_000,
        'the delete to wait for the send',
      );
      await client.query('commit');
      const removed = await removing;
      expect(removed.statusCode, removed.body).toBe(200);
    } finally {
      client.release();
    }

    expect(await versionsLeft([version])).toEqual([version]);
    const rendered = await dataOf(await call(team, 'GET', `/api/logs/${emailId}/rendered`));
    expect(rendered.html).toContain('Racing text for Ada');
  });
});
