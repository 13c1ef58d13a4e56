import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { SendOutcome } from '../src/modules/emails/send-outcome-recorder.ts';
import { SendOutcomeRecorder } from '../src/modules/emails/send-outcome-recorder.ts';
import { createTestContext, type TestContext } from './helpers/app.ts';
import { dashboardCall, dataOf, send } from './helpers/factories.ts';
import { statementsDuring } from './helpers/pool-statements.ts';
import { createTeamWithKey } from './helpers/sending-team.ts';

/**
 * Issue #11 "Outcomes per recipient" under the worker's performance rule: recording `sent`
 * outcomes writes no recipient row and no extra statement when every recipient was accepted, and
 * one multi-row statement per group (plus one for the suppressions) when some were refused.
 */
describe('SendOutcomeRecorder: refused recipients', () => {
  let ctx: TestContext;

  beforeAll(async () => {
    ctx = await createTestContext('postgres');
  });
  afterAll(() => ctx?.close());

  /** The SQL texts every pg.Client (pooled connections, so transactions too) sends during `action`. */
  const clientStatements = (action: () => Promise<unknown>) => statementsDuring(pg.Client.prototype, action);

  it('writes nothing per recipient for all-accepted sends, one statement per group for refusals', async () => {
    const team = await createTeamWithKey(ctx.app);
    const ids: string[] = [];
    for (let i = 0; i < 4; i++) {
      const { id } = await dataOf(
        await send(ctx.app, team.key, {
          templateId: team.templateId,
          to: [`a${i}@example.test`, `b${i}@example.test`],
          cc: `c${i}@example.test`,
        }),
        202,
      );
      ids.push(id);
    }
    const recorder = new SendOutcomeRecorder(ctx.app.ctx.database.db);
    const ref = (id: string) => ({ id, teamId: team.owner.teamId });
    const plain = (n: number) =>
      ({ kind: 'sent', providerMessageId: `plain-${n}`, attempt: 1 }) satisfies SendOutcome;

    const common = await clientStatements(() =>
      Promise.all([recorder.record(ref(ids[0]!), plain(0)), recorder.record(ref(ids[1]!), plain(1))]),
    );
    expect(common.some((text) => /email_logs/.test(text))).toBe(true); // the recording is seen
    expect(common.some((text) => /email_recipients|suppressions/.test(text))).toBe(false);

    const refused = await clientStatements(() =>
      Promise.all([
        recorder.record(ref(ids[2]!), {
          ...plain(2),
          refused: [
            {
              address: 'b2@example.test',
              kind: 'to',
              permanent: true,
              diagnostic: '550 5.1.1 mailbox unavailable',
            },
          ],
        }),
        recorder.record(ref(ids[3]!), {
          ...plain(3),
          refused: [
            {
              address: 'b3@example.test',
              kind: 'to',
              permanent: true,
              diagnostic: '550 5.1.1 mailbox unavailable',
            },
            {
              address: 'c3@example.test',
              kind: 'cc',
              permanent: false,
              diagnostic: '450 4.2.1 mailbox unavailable',
            },
          ],
        }),
      ]),
    );
    expect(refused.filter((text) => /insert into "email_recipients"/i.test(text))).toHaveLength(1);
    expect(refused.filter((text) => /insert into "suppressions"/i.test(text))).toHaveLength(1);

    const recipients = async (id: string) =>
      (await dataOf(await dashboardCall(ctx.app, team.owner, 'GET', `/api/logs/${id}/recipients`))).map(
        (r: { address: string; status: string; bounceType: string | null }) => [
          r.address,
          r.status,
          r.bounceType,
        ],
      );
    expect(await recipients(ids[0]!)).toEqual([
      ['a0@example.test', 'sent', null],
      ['b0@example.test', 'sent', null],
      ['c0@example.test', 'sent', null],
    ]);
    expect(await recipients(ids[3]!)).toEqual([
      ['a3@example.test', 'sent', null],
      ['b3@example.test', 'bounced', 'hard'],
      ['c3@example.test', 'bounced', 'soft'],
    ]);
    const page = await dataOf(await dashboardCall(ctx.app, team.owner, 'GET', '/api/suppressions'));
    expect(page.items.map((item: { address: string }) => item.address).sort()).toEqual([
      'b2@example.test',
      'b3@example.test',
    ]);
  });
});
