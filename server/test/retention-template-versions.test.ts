import { sql } from 'drizzle-orm';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { MaintenanceLoopDeps } from '../src/modules/maintenance/index.ts';
import { orphanedTemplateVersionsDelete } from '../src/modules/maintenance/maintenance.repository.ts';
import { createTestContext, type TestContext } from './helpers/app.ts';
import { buildTemplate, dashboardCall } from './helpers/factories.ts';
import {
  ageEmailLog,
  cancelEmail,
  rowsOf,
  scheduledSend,
  TestMaintenanceLoops,
} from './helpers/retention.ts';
import { createTeamWithKey, type SendingTeam } from './helpers/sending-team.ts';

/**
 * Review finding diff19 1: deleting a template keeps the versions its email logs name (so they can
 * be re-rendered). Once retention deleted those logs, and for every version of a template deleted
 * before versions were deleted with it, nothing deleted them: they stayed for good, up to 2 MB of
 * design each, out of any API's reach. The maintenance loop now deletes the versions of deleted
 * templates that no log names, in bounded batches. Real PostgreSQL; no workers (a scheduled email
 * stays `queued`, a cancelled one is `failed`).
 */

let ctx: TestContext;
/** Every loop a test made, stopped after the file. */
const loops = new TestMaintenanceLoops(() => ctx.context.database);

beforeAll(async () => {
  ctx = await createTestContext('postgres');
});
afterAll(async () => {
  await loops.stopAll();
  await ctx?.close();
});

/** A maintenance loop over the test database (`overrides` on the defaults), not started. */
const maintenanceLoop = (overrides?: Partial<MaintenanceLoopDeps>) => loops.create(overrides);
const rows = <T>(query: ReturnType<typeof sql>) => rowsOf<T>(ctx.context.db, query);

async function versionsLeft(ids: string[]): Promise<number> {
  const [row] = await rows<{ n: number }>(
    sql`select count(*)::int as n from template_versions where id in ${ids}`,
  );
  return row!.n;
}

/** A scheduled send of `templateId` (default the team's), cancelled (`failed`); its log id and version id. */
async function cancelledSend(team: SendingTeam, templateId = team.templateId) {
  const emailId = await scheduledSend(ctx.app, team, { templateId });
  await cancelEmail(ctx.app, team, emailId);
  const [log] = await rows<{ version: string }>(
    sql`select template_version_id as version from email_logs where id = ${emailId}`,
  );
  return { emailId, versionId: log!.version };
}

const age = (emailId: string, days: number) => ageEmailLog(ctx.context.db, emailId, days);

async function deleteTemplate(team: SendingTeam, templateId: string): Promise<void> {
  const response = await dashboardCall(ctx.app, team.owner, 'DELETE', `/api/templates/${templateId}`);
  expect(response.statusCode, response.body).toBe(200);
}

describe('versions of deleted templates', () => {
  it('are deleted once retention deleted the last log naming them, not before', async () => {
    const team = await createTeamWithKey(ctx.app);
    const old = await cancelledSend(team);
    const recent = await cancelledSend(team);
    expect(recent.versionId).toBe(old.versionId);
    await deleteTemplate(team, team.templateId);
    await age(old.emailId, 2);
    const retention = maintenanceLoop({ config: { LOG_RETENTION_DAYS: 1 } });

    const first = await retention.runOnce();

    // The old log is gone; the recent one still names the version, which it re-renders from.
    expect(first?.finished).toBe(true);
    expect(await versionsLeft([old.versionId])).toBe(1);
    const content = await dashboardCall(ctx.app, team.owner, 'GET', `/api/logs/${recent.emailId}/rendered`);
    expect(content.statusCode, content.body).toBe(200);

    await age(recent.emailId, 2);
    const second = await retention.runOnce();

    expect(second?.finished).toBe(true);
    expect(second?.templateVersions).toBeGreaterThanOrEqual(1);
    expect(await versionsLeft([old.versionId])).toBe(0);
  });

  it('are deleted without retention when no log names them (templates deleted before this release), in batches; a named one stays', async () => {
    const team = await createTeamWithKey(ctx.app);
    const named = await cancelledSend(team);
    const orphaned: string[] = [];
    for (let i = 0; i < 5; i++) {
      const template = await buildTemplate(ctx.app, team.owner, { name: `Old ${i}` });
      const [version] = await rows<{ id: string }>(
        sql`select id from template_versions where template_id = ${template.id}`,
      );
      orphaned.push(version!.id);
    }
    // What a template delete did before: every version kept (the foreign key sets template_id null).
    await ctx.context.db.execute(sql`delete from templates where team_id = ${team.owner.teamId}`);
    expect(await versionsLeft([...orphaned, named.versionId])).toBe(6);

    const report = await maintenanceLoop({ batchRows: 2 }).runOnce();

    expect(report?.finished).toBe(true);
    expect(report?.templateVersions).toBeGreaterThanOrEqual(5);
    expect(await versionsLeft(orphaned)).toBe(0);
    expect(await versionsLeft([named.versionId])).toBe(1);
    const content = await dashboardCall(ctx.app, team.owner, 'GET', `/api/logs/${named.emailId}/rendered`);
    expect(content.statusCode, content.body).toBe(200);
  });

  it("finds them through the two partial indexes (a send's log insert does not write them)", async () => {
    const lines = await ctx.context.db.transaction(async (tx) => {
      // The test tables are tiny: without this the planner reads them whole.
      await tx.execute(sql`set local enable_seqscan = off`);
      const explained = await tx.execute(sql`explain ${orphanedTemplateVersionsDelete('', 1_000)}`);
      return (explained as unknown as { rows: { 'QUERY PLAN': string }[] }).rows
        .map((row) => row['QUERY PLAN'])
        .join('\n');
    });
    expect(lines).toContain('template_versions_orphan_idx');
    expect(lines).toContain('email_logs_orphan_version_idx');
    const [definition] = await rows<{ indexdef: string }>(
      sql`select indexdef from pg_indexes where indexname = 'email_logs_orphan_version_idx'`,
    );
    expect(definition?.indexdef).toMatch(/WHERE \(template_id IS NULL\)$/);
  });
});
