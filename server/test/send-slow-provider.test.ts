import type { AddressInfo } from 'node:net';
import { SMTPServer, type SMTPServerOptions } from 'smtp-server';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { EMAIL_SEND_JOB } from '../src/jobs/definitions.ts';
import { createTestContext, type TestContext, waitFor } from './helpers/app.ts';
import { sessionHeaders, setupOwner, type TeamOwner } from './helpers/auth.ts';
import { buildApiKey, buildSmtpAdapter, buildTemplate, send } from './helpers/factories.ts';
import { startTestSmtpServer, type TestSmtpServer } from './helpers/smtp-server.ts';

/** A real SMTP server that is slow where `options` say; counts connections and full messages. */
async function startSlowServer(options: Partial<SMTPServerOptions>) {
  const state = {
    port: 0,
    open: 0,
    peakOpen: 0,
    rcpts: [] as string[],
    /** Sessions waiting for their RCPT TO answer (a send in progress), and their peak. */
    pending: new Set<string>(),
    peakRcpts: 0,
    messages: 0,
    close: async () => {},
  };
  const server = new SMTPServer({
    disabledCommands: ['STARTTLS', 'AUTH'],
    logger: false,
    onConnect(_session, callback) {
      state.open += 1;
      state.peakOpen = Math.max(state.peakOpen, state.open);
      callback();
    },
    onClose(session) {
      state.open -= 1;
      state.pending.delete(session.id);
    },
    onData(stream, _session, callback) {
      stream.on('data', () => {});
      stream.on('end', () => {
        state.messages += 1;
        callback();
      });
    },
    ...options,
  });
  server.on('error', () => {});
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  state.port = (server.server.address() as AddressInfo).port;
  state.close = () => new Promise<void>((resolve) => server.close(() => resolve()));
  return state;
}

/**
 * Issue #8: one team's slow SMTP server must not delay another team's email; a send has an
 * overall deadline; concurrent sends per adapter are capped.
 */
describe('a slow provider', () => {
  const RCPT_DELAY_MS = 6_000;
  let ctx: TestContext;
  let fast: TestSmtpServer;
  let slowRcpt: Awaited<ReturnType<typeof startSlowServer>>;
  let slowReply: Awaited<ReturnType<typeof startSlowServer>>;

  async function acceptFor(owner: TeamOwner, port: number, recipients: string[]): Promise<string[]> {
    const key = (await buildApiKey(ctx.app, owner)).key;
    await buildSmtpAdapter(ctx.app, owner, port);
    const templateId = (await buildTemplate(ctx.app, owner, { name: 'Slow' })).id;
    const ids: string[] = [];
    for (const to of recipients) {
      const response = await send(ctx.app, key, { templateId, to });
      expect(response.statusCode, response.body).toBe(202);
      ids.push(response.json().data.id);
    }
    return ids;
  }

  beforeAll(async () => {
    ctx = await createTestContext('postgres', {
      SEND_TIMEOUT_SECONDS: '2',
      SEND_RETRY_LIMIT: '1',
      SEND_RETRY_DELAY_SECONDS: '1',
      // 9 emails in flight per worker; per team at most 4 × 2 = 8 across workers.
      WORKER_CONCURRENCY: '9',
      ADAPTER_MAX_CONNECTIONS: '2',
    });
    fast = await startTestSmtpServer();
    slowRcpt = await startSlowServer({
      onRcptTo(address, session, callback) {
        slowRcpt.rcpts.push(address.address);
        slowRcpt.pending.add(session.id);
        slowRcpt.peakRcpts = Math.max(slowRcpt.peakRcpts, slowRcpt.pending.size);
        setTimeout(() => {
          slowRcpt.pending.delete(session.id);
          callback();
        }, RCPT_DELAY_MS);
      },
    });
    slowReply = await startSlowServer({
      onData(stream, _session, callback) {
        stream.on('data', () => {});
        stream.on('end', () => {
          slowReply.messages += 1;
          setTimeout(() => callback(), 4_000);
        });
      },
    });
    await ctx.startWorkers();
  });
  afterAll(async () => {
    await ctx?.close();
    await Promise.all([fast?.close(), slowRcpt?.close(), slowReply?.close()]);
  });

  const logOf = async (owner: TeamOwner, id: string) =>
    (
      await ctx.app.inject({ method: 'GET', url: `/api/logs/${id}`, headers: sessionHeaders(ctx.app, owner) })
    ).json().data;

  // Teams A and B share this case: the claim is about the one while the other is slow.
  it("sends team B's email while team A's slow ones are on their first attempt; ends A's at the deadline, retries them, then records failed", async () => {
    // The teams and their emails are this case's: its timeline starts here, whatever ran before.
    const [teamA, teamB] = [await setupOwner(ctx.app), await setupOwner(ctx.app)];
    // Team A's nine emails are older than B's: a first-come worker would give A every slot.
    const aRecipients = Array.from({ length: 9 }, (_, i) => `a${i}@example.test`);
    const aIds = await acceptFor(teamA, slowRcpt.port, aRecipients);
    const [bId] = (await acceptFor(teamB, fast.port, ['b@example.test'])) as [string];
    const b = await waitFor(async () => {
      const log = await logOf(teamB, bId);
      return log.status === 'sent' ? log : undefined;
    }, 20_000);
    expect(b.attemptCount).toBe(1);
    // No attempt of A has ended yet (the first end at the 2 s deadline): B did not wait for A.
    const a = await Promise.all(aIds.map((id) => logOf(teamA, id)));
    expect(a.map((log) => [log.status, log.attemptCount])).toEqual(aIds.map(() => ['queued', 0]));
    expect(fast.messages.map((m) => m.envelopeTo)).toEqual([['b@example.test']]);
    // B's job is settled on its own, although A's jobs claimed with it are still running.
    const bJob = await waitFor(async () => {
      const [job] = await ctx.queue.boss.findJobs(EMAIL_SEND_JOB, { data: { emailId: bId } });
      return job?.state === 'completed' ? job : undefined;
    }, 5_000);
    expect(bJob.state).toBe('completed');
    const aJobs = await ctx.queue.boss.findJobs(EMAIL_SEND_JOB, { data: { teamId: teamA.teamId } });
    expect(aJobs.filter((job) => job.state === 'active').length).toBeGreaterThan(0);
    expect(aJobs.some((job) => job.state === 'completed')).toBe(false);

    // Then A's attempts end at the deadline, are retried, and are recorded failed. (One case: as
    // two, this half passed alone and left the first half nothing to observe when it ran first.)
    const logs = await Promise.all(
      aIds.map((id) =>
        waitFor(
          async () => {
            const log = await logOf(teamA, id);
            return log.status === 'failed' ? log : undefined;
          },
          60_000,
          `A's email ${id} to fail`,
        ),
      ),
    );
    for (const log of logs) {
      expect(log.attemptCount).toBe(2); // first attempt + SEND_RETRY_LIMIT=1 retry
      expect(log.errorMessage).toContain('2 s send deadline');
      expect(log.errorMessage).toContain('before the message was transmitted');
      expect(log.events.map((e: { status: string }) => e.status)).toEqual(['queued', 'failed']);
    }
    // The slow server never got a message: every attempt was given up before DATA.
    expect(slowRcpt.messages).toBe(0);
    // Connections to A's server: ADAPTER_MAX_CONNECTIONS, plus one whose close the server may not
    // have seen yet when the pool opened the next (without the cap: 8, the team's in-flight jobs).
    expect(slowRcpt.peakOpen).toBeLessThanOrEqual(3);
    // Sends at once to A's server, as it saw them: at most ADAPTER_MAX_CONNECTIONS.
    expect(slowRcpt.peakRcpts).toBeLessThanOrEqual(2);
  });

  it('does not retry a send whose deadline passed after the message was transmitted', async () => {
    const teamC = await setupOwner(ctx.app);
    const [cId] = (await acceptFor(teamC, slowReply.port, ['c@example.test'])) as [string];
    const log = await waitFor(async () => {
      const found = await logOf(teamC, cId);
      return found.status === 'failed' ? found : undefined;
    }, 20_000);
    expect(log.attemptCount).toBe(1); // SEND_RETRY_LIMIT=1 allowed a retry; it was not taken
    expect(log.errorMessage).toContain('may have been delivered');
    expect(log.events.at(-1)).toMatchObject({ status: 'failed', detail: { ambiguous: true } });
    // The server got the message exactly once, and no second attempt follows.
    await new Promise((resolve) => setTimeout(resolve, 3_000));
    expect(slowReply.messages).toBe(1);
  });
});
