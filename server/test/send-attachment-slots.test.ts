import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestContext, type TestContext, waitFor } from './helpers/app.ts';
import { dashboardCall, dataOf, send } from './helpers/factories.ts';
import { recordPoolStatements } from './helpers/pool-statements.ts';
import { createTeamWithKey } from './helpers/sending-team.ts';
import { startTestSmtpServer, type TestSmtpServer } from './helpers/smtp-server.ts';

/**
 * The worker loads an email's attachments once the email holds one of its adapter's connection
 * slots, not while it waits for one (review finding, session 15: loaded before, every waiting
 * email's attachments were in memory at once: up to 60 emails per team, each up to 70 MB with
 * its PDFs).
 */
describe('attachments and send slots', () => {
  let ctx: TestContext;
  let smtp: TestSmtpServer;
  let releaseFirst: () => void = () => {};
  const held = new Promise<void>((resolve) => {
    releaseFirst = resolve;
  });
  let firstSeen = false;

  beforeAll(async () => {
    ctx = await createTestContext('postgres', { ADAPTER_MAX_CONNECTIONS: '1' });
    smtp = await startTestSmtpServer({
      onRcptTo(_address, _session, callback) {
        // The first email holds the adapter's one connection until the test lets it go.
        if (!firstSeen) {
          firstSeen = true;
          void held.then(() => callback());
        } else callback();
      },
    });
    await ctx.startWorkers();
  });
  afterAll(async () => {
    releaseFirst();
    await ctx?.close();
    await smtp?.close();
  });

  it('reads the attachments of the email holding the slot only, not of those waiting', async () => {
    const team = await createTeamWithKey(ctx.app, { smtpPort: smtp.port });
    const statements = recordPoolStatements(ctx.app.ctx.database.pool);
    try {
      const ids: string[] = [];
      for (let i = 0; i < 6; i++) {
        const response = await send(ctx.app, team.key, {
          templateId: team.templateId,
          to: `slot${i}@example.test`,
          attachments: [{ filename: `a${i}.txt`, content: Buffer.from(`file ${i}`).toString('base64') }],
        });
        expect(response.statusCode, response.body).toBe(202);
        ids.push(response.json().data.id);
      }
      await waitFor(async () => firstSeen);
      // Give the worker time to claim the other five and queue them for the slot.
      await new Promise((resolve) => setTimeout(resolve, 1_500));
      const reads = () => statements.texts.filter((text) => text.includes('"email_attachments"')).length;
      expect(reads()).toBe(1);
      releaseFirst();
      await smtp.waitForMessages(6);
      expect(reads()).toBe(6);
      for (const id of ids) {
        await waitFor(
          async () =>
            (await dataOf(await dashboardCall(ctx.app, team.owner, 'GET', `/api/logs/${id}`))).status ===
            'sent',
        );
      }
      expect(smtp.messages.map((m) => m.parsed.attachments[0]?.filename).sort()).toEqual([
        'a0.txt',
        'a1.txt',
        'a2.txt',
        'a3.txt',
        'a4.txt',
        'a5.txt',
      ]);
    } finally {
      statements.stop();
    }
  });
});
