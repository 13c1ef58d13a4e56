import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DESIGN_MAX_BYTES, DESIGN_MAX_VALUES } from '../src/modules/templates/templates.service.ts';
import { createTestContext, type TestContext } from './helpers/app.ts';
import { dashboardCall, dataOf, expectError, send, simpleDesign } from './helpers/factories.ts';
import { type PoolStatements, recordPoolStatements } from './helpers/pool-statements.ts';
import { createTeamWithKey } from './helpers/sending-team.ts';

/*
 * Review finding, session 12: the log and template lists read whole rows, the variables of every
 * log (up to 256 KB each) and the design and compiled HTML of every template (megabytes at worst),
 * to answer a few columns: 100 logs with large variables cost 0.4-0.6 s of CPU and 50 MB of heap
 * per page. The lists now read only the columns they show.
 */
describe('the log and template lists read only the columns they show', () => {
  let ctx: TestContext;
  let statements: PoolStatements;

  beforeAll(async () => {
    ctx = await createTestContext('postgres');
    statements = recordPoolStatements(ctx.app.ctx.database.pool);
  });
  afterAll(() => ctx?.close());

  it('GET /api/logs reads no variables; GET /api/templates no design or HTML', async () => {
    const team = await createTeamWithKey(ctx.app);
    const note = 'v'.repeat(10_000);
    const sent = await send(ctx.app, team.key, {
      templateId: team.templateId,
      to: 'ann@example.com',
      variables: { first_name: 'Ann', note },
    });
    expect(sent.statusCode, sent.body).toBe(202);

    statements.clear();
    const logs = await dataOf(await dashboardCall(ctx.app, team.owner, 'GET', '/api/logs'));
    expect(logs.items).toHaveLength(1);
    expect(logs.items[0]).toMatchObject({ id: sent.json().data.id, toAddresses: ['ann@example.com'] });
    const logReads = statements.texts.filter(
      (text) => /from "email_logs"/.test(text) && /order by/i.test(text),
    );
    expect(logReads).toHaveLength(1);
    expect(logReads[0]).not.toContain('"variables"');

    statements.clear();
    const list = await dataOf(await dashboardCall(ctx.app, team.owner, 'GET', '/api/templates'));
    expect(list.items.map((t: { id: string }) => t.id)).toContain(team.templateId);
    const templateReads = statements.texts.filter(
      (text) => /from "templates"/.test(text) && /order by/i.test(text),
    );
    expect(templateReads).toHaveLength(1);
    expect(templateReads[0]).not.toContain('"design_json"');
    expect(templateReads[0]).not.toContain('"compiled_html"');
  });

  it('GET /api/templates/:id/versions reads no design (review finding, session 14)', async () => {
    // Each version holds its design (up to 2 MB): 60 versions of such a design made one list
    // request hold ~90 MB, for four columns per version.
    const team = await createTeamWithKey(ctx.app);
    const path = `/api/templates/${team.templateId}/versions`;
    expect((await dashboardCall(ctx.app, team.owner, 'POST', path, { name: 'Second' })).statusCode).toBe(201);
    statements.clear();
    const versions = await dataOf(await dashboardCall(ctx.app, team.owner, 'GET', path));
    expect(versions.map((v: { name: string }) => v.name)).toEqual(['Second', 'Version 1']);
    const versionReads = statements.texts.filter(
      (text) => /from "template_versions"/.test(text) && /order by/i.test(text),
    );
    expect(versionReads).toHaveLength(1);
    expect(versionReads[0]).not.toContain('"design_json"');
    expect(versionReads[0]).not.toContain('"compiled_html"');
  });

  it('GET /api/templates/:id/versions answers the newest 100, or `limit` up to 1,000 (review finding, session 16)', async () => {
    // With no bound, 100,000 versions answered 18.6 MB in one array.
    const team = await createTeamWithKey(ctx.app);
    const { templateId } = team;
    await ctx.context.database.pool.query(
      `insert into template_versions (id, team_id, template_id, number, name, template_name, subject, design_json)
        select 'tv_bulk_' || n || '_' || v.id, v.team_id, v.template_id, n, 'Bulk ' || n, v.template_name, v.subject, v.design_json
        from template_versions v, generate_series(2, 150) as n where v.template_id = $1`,
      [templateId],
    );
    const path = `/api/templates/${templateId}/versions`;
    const byDefault = await dataOf(await dashboardCall(ctx.app, team.owner, 'GET', path));
    expect(byDefault).toHaveLength(100);
    expect(byDefault[0].name).toBe('Bulk 150');
    const three = await dataOf(await dashboardCall(ctx.app, team.owner, 'GET', `${path}?limit=3`));
    expect(three.map((v: { name: string }) => v.name)).toEqual(['Bulk 150', 'Bulk 149', 'Bulk 148']);
    expectError(
      await dashboardCall(ctx.app, team.owner, 'GET', `${path}?limit=1001`),
      400,
      'VALIDATION_ERROR',
    );
    // Decimal digits, given once (review finding, session 18: `0x3` read as 3, a repeat as NaN).
    for (const [query, message] of [
      ['limit=0x3', 'must be an integer from 1 to 1000'],
      ['limit=3&limit=4', 'must be given once'],
    ]) {
      const error = expectError(
        await dashboardCall(ctx.app, team.owner, 'GET', `${path}?${query}`),
        400,
        'VALIDATION_ERROR',
      );
      expect(error.details.issues).toEqual([{ path: 'querystring.limit', message }]);
    }
  });
});

describe('the size of a design', () => {
  let ctx: TestContext;

  beforeAll(async () => {
    ctx = await createTestContext('postgres');
  });
  afterAll(() => ctx?.close());

  it('refuses a design over 2 MB of JSON (unknown keys are kept, so only the body limit bounded it)', async () => {
    const team = await createTeamWithKey(ctx.app);
    const withJunk = (bytes: number) => {
      const design = simpleDesign('Hi {{ first_name }}');
      (design.b1!.data.props as Record<string, unknown>).junk = 'j'.repeat(bytes);
      return design;
    };
    const big = await dashboardCall(ctx.app, team.owner, 'POST', '/api/templates', {
      name: 'big',
      subject: 'S',
      designJson: withJunk(DESIGN_MAX_BYTES),
    });
    expect(expectError(big, 400, 'INVALID_TEMPLATE').details).toMatchObject({ reason: 'LIMIT_EXCEEDED' });
    const fits = await dashboardCall(ctx.app, team.owner, 'POST', '/api/templates', {
      name: 'fits',
      subject: 'S',
      designJson: withJunk(100_000),
    });
    expect(fits.statusCode, fits.body.slice(0, 300)).toBe(201);
    const stored = await dataOf(
      await dashboardCall(ctx.app, team.owner, 'GET', `/api/templates/${fits.json().data.id}`),
    );
    expect(stored.designJson.b1.data.props.junk).toHaveLength(100_000);
  });

  it('refuses a design of more than 100,000 JSON values (2 MB of them parsed into 43 MB, review finding)', async () => {
    const team = await createTeamWithKey(ctx.app);
    const withValues = (count: number) => {
      const design = simpleDesign('Hi {{ first_name }}');
      (design.b1!.data.props as Record<string, unknown>).junk = Array.from({ length: count }, () => ({}));
      return design;
    };
    const many = await dashboardCall(ctx.app, team.owner, 'POST', '/api/templates', {
      name: 'many',
      subject: 'S',
      designJson: withValues(DESIGN_MAX_VALUES),
    });
    expect(expectError(many, 400, 'INVALID_TEMPLATE').details).toMatchObject({
      reason: 'LIMIT_EXCEEDED',
      issues: [{ path: 'designJson' }],
    });
    const update = await dashboardCall(ctx.app, team.owner, 'PUT', `/api/templates/${team.templateId}`, {
      designJson: withValues(DESIGN_MAX_VALUES),
    });
    expect(expectError(update, 400, 'INVALID_TEMPLATE').details).toMatchObject({ reason: 'LIMIT_EXCEEDED' });
    const fits = await dashboardCall(ctx.app, team.owner, 'POST', '/api/templates', {
      name: 'fits',
      subject: 'S',
      designJson: withValues(DESIGN_MAX_VALUES - 100),
    });
    expect(fits.statusCode, fits.body.slice(0, 300)).toBe(201);
  });
});
