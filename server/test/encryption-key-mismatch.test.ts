import { randomBytes } from 'node:crypto';
import { chmodSync, existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { eq } from 'drizzle-orm';
import type { FastifyInstance } from 'fastify';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildApp } from '../src/app.ts';
import { type Context, createContext } from '../src/context.ts';
import { adapters, webhooks } from '../src/db/schema/index.ts';
import { bindJobHandlers } from '../src/job-handlers.ts';
import { startWorkers } from '../src/jobs/registry.ts';
import { encryptConfig } from '../src/modules/adapters/index.ts';
import { createTestContext, type TestContext, waitFor } from './helpers/app.ts';
import { signIn } from './helpers/auth.ts';
import { dashboardCall, dataOf, expectError, send } from './helpers/factories.ts';
import { cliEnvOn, startCli } from './helpers/process.ts';
import { createTeamWithKey, type SendingTeam } from './helpers/sending-team.ts';
import { startTestSmtpServer, type TestSmtpServer } from './helpers/smtp-server.ts';
import { startWebhookReceiver, verifyWebhook, type WebhookReceiver } from './helpers/webhook-receiver.ts';

/**
 * Runs the CLI until it exits (its output streams closed) or says it is listening, whichever comes
 * first (a server that starts when it should have refused does not hold the test until its
 * timeout); returns the exit code (or "listening") and what it printed. A listening one is stopped.
 */
async function runToExit(args: string[], env: Record<string, string>) {
  const cli = startCli(args, env);
  const closed = new Promise<number | null>((resolve) => cli.child.once('close', resolve));
  try {
    const listening = cli.waitForOutput(/listening on/).then(
      () => 'listening' as const,
      () => closed,
    );
    const code = await Promise.race([closed, listening]);
    return { code, output: cli.output().trim() };
  } finally {
    await cli.stop();
  }
}

/**
 * Review finding (integrity 2 and 3): ENCRYPTION_KEY changed under a database holding adapter
 * configs and webhook secrets. Each case stores rows through a context with the tests' key (K1),
 * then acts through a second context on the same database with another key (K2): a restart with
 * ENCRYPTION_KEY changed.
 */
describe('a second context with another ENCRYPTION_KEY on the same database', () => {
  let ctx: TestContext;
  let context2: Context;
  let app2: FastifyInstance;
  let smtp: TestSmtpServer;
  let receiver: WebhookReceiver;

  beforeAll(async () => {
    ctx = await createTestContext('postgres', {
      SEND_RETRY_LIMIT: '2',
      WEBHOOKS_ALLOW_PRIVATE: 'true',
      WEBHOOK_RETRY_SCHEDULE: '1,1',
      WEBHOOK_TIMEOUT_SECONDS: '2',
    });
    context2 = await createContext({
      config: ctx.config,
      database: ctx.context.database,
      queue: ctx.queue,
      encryptionKey: randomBytes(32),
    });
    app2 = await buildApp(context2);
    await app2.ready();
    // Only the K2 process works the queue.
    await startWorkers(ctx.queue, ctx.config, bindJobHandlers(context2));
    smtp = await startTestSmtpServer();
    receiver = await startWebhookReceiver();
  });
  afterAll(async () => {
    await app2?.close();
    await ctx?.close();
    await context2?.close();
    await smtp?.close();
    await receiver?.close();
  });

  const db = () => ctx.context.database.db;

  /** A team with an SMTP adapter and a webhook on `hookPath`, written under K1; its owner signed in to app2. */
  async function teamWithWebhook(hookPath: string) {
    const team = await createTeamWithKey(ctx.app, { smtpPort: smtp.port });
    const hook = await dataOf(
      await dashboardCall(ctx.app, team.owner, 'POST', '/api/webhooks', {
        name: 'Hook',
        url: receiver.url(hookPath),
        events: ['email.sent'],
      }),
      201,
    );
    const user = { cookie: await signIn(app2, team.owner.email, team.owner.password) };
    return { team, hookId: hook.id as string, user };
  }

  async function storedWebhook(id: string) {
    const [row] = await db().select().from(webhooks).where(eq(webhooks.id, id));
    return row!;
  }

  async function reenterConfig(team: SendingTeam, user: { cookie: string }) {
    await dataOf(
      await dashboardCall(app2, user, 'PUT', `/api/adapters/${team.adapterId}`, {
        config: { host: '127.0.0.1', port: smtp.port, secure: false },
      }),
    );
  }

  it('rotating the secret after the key change: deliveries are signed with the new secret at once', async () => {
    const { team, hookId, user } = await teamWithWebhook('/rotated');
    const rotated = await dataOf(
      await dashboardCall(app2, user, 'POST', `/api/webhooks/${hookId}/rotate-secret`),
    );
    // The old secret (written under K1) cannot sign: it is not kept for the 24 h overlap.
    expect((await storedWebhook(hookId)).previousSecrets).toEqual([]);
    await reenterConfig(team, user);
    const accepted = await dataOf(
      await send(app2, team.key, { templateId: team.templateId, to: 'a@example.com' }),
      202,
    );
    const [request] = await waitFor(async () => {
      const got = receiver.to('/rotated');
      return got.length > 0 ? got : undefined;
    });
    expect(request!.json).toMatchObject({ event: 'email.sent', data: { emailId: accepted.id } });
    expect(String(request!.headers['webhook-signature']).split(' ')).toHaveLength(1);
    verifyWebhook(rotated.secret, request!);
    const deliveries = await dataOf(
      await dashboardCall(app2, user, 'GET', `/api/webhooks/${hookId}/deliveries`),
    );
    expect(deliveries.map((d: { success: boolean; error: string | null }) => [d.success, d.error])).toEqual([
      [true, null],
    ]);
  });

  it('a rotated-out secret that does not decrypt is left out of the signature, not a failed attempt', async () => {
    // A rotation made before this fix (or by a process still on the old key) kept the unreadable one.
    const { hookId, user } = await teamWithWebhook('/kept-unreadable');
    const written = (await storedWebhook(hookId)).secretEncrypted;
    const rotated = await dataOf(
      await dashboardCall(app2, user, 'POST', `/api/webhooks/${hookId}/rotate-secret`),
    );
    const expiresAt = new Date(Date.now() + 3600_000).toISOString();
    await db()
      .update(webhooks)
      .set({ previousSecrets: [{ secret: written, expiresAt }] })
      .where(eq(webhooks.id, hookId));
    const delivery = await dataOf(await dashboardCall(app2, user, 'POST', `/api/webhooks/${hookId}/test`));
    expect([delivery.success, delivery.error]).toEqual([true, null]);
    const [request] = receiver.to('/kept-unreadable');
    expect(String(request!.headers['webhook-signature']).split(' ')).toHaveLength(1);
    verifyWebhook(rotated.secret, request!);
  });

  it('GET /api/adapters/:id answers 409 CONFIG_UNREADABLE, then the config once it is entered again', async () => {
    const { team, user } = await teamWithWebhook('/unused-adapter-view');
    const error = expectError(
      await dashboardCall(app2, user, 'GET', `/api/adapters/${team.adapterId}`),
      409,
      'CONFLICT',
    );
    expect(error.details.reason).toBe('CONFIG_UNREADABLE');
    expect(error.message).toMatch(/ENCRYPTION_KEY.*enter the configuration again/);
    await reenterConfig(team, user);
    const adapter = await dataOf(await dashboardCall(app2, user, 'GET', `/api/adapters/${team.adapterId}`));
    expect(adapter.config).toMatchObject({ host: '127.0.0.1', port: smtp.port });
  });

  it('a send through an adapter whose config does not decrypt ends failed at once, saying what to do', async () => {
    const { team, user } = await teamWithWebhook('/unused-send');
    const accepted = await dataOf(
      await send(app2, team.key, { templateId: team.templateId, to: 'b@example.com' }),
      202,
    );
    const log = await waitFor(async () => {
      const data = await dataOf(await dashboardCall(app2, user, 'GET', `/api/logs/${accepted.id}`));
      return data.status === 'queued' ? undefined : data;
    });
    expect(log.status).toBe('failed');
    // Not retried (SEND_RETRY_LIMIT is 2): one attempt.
    expect(log.attemptCount).toBe(1);
    expect(log.errorMessage).toMatch(/ENCRYPTION_KEY.*enter the adapter's configuration again/);
  });
});

describe('start-up checks the key against the database', () => {
  let ctx: TestContext;
  let team: SendingTeam;
  const otherKey = randomBytes(32).toString('base64');

  beforeAll(async () => {
    ctx = await createTestContext('postgres', { WEBHOOKS_ALLOW_PRIVATE: 'true' });
    team = await createTeamWithKey(ctx.app);
    await dataOf(
      await dashboardCall(ctx.app, team.owner, 'POST', '/api/webhooks', {
        name: 'Hook',
        url: 'http://127.0.0.1:9/hook',
        events: ['email.sent'],
      }),
      201,
    );
  });
  afterAll(() => ctx?.close());

  const startEnv = (extra: Record<string, string> = {}) =>
    cliEnvOn(ctx.context.database.connectionString, {
      PORT: '0',
      HOST: '127.0.0.1',
      BASE_URL: 'http://localhost:9',
      ...extra,
    });

  it('starts with the key the database was written with, without a warning', async () => {
    const cli = startCli(['start', '--role', 'api'], startEnv());
    try {
      await cli.waitForOutput(/listening on/);
      expect(cli.output()).not.toMatch(/ENCRYPTION_KEY/);
    } finally {
      await cli.stop();
    }
  }, 60_000);

  it('refuses another key in one line naming ENCRYPTION_KEY when it reads none of what is stored', async () => {
    const { code, output } = await runToExit(
      ['start', '--role', 'api'],
      startEnv({ ENCRYPTION_KEY: otherKey }),
    );
    expect(code, output).toBe(1);
    expect(output).toMatch(
      /^Invalid ENCRYPTION_KEY: it decrypts none of the 2 adapter configs and webhook secrets checked, so it is not the key this database was written with/,
    );
    expect(output).toContain('If that key is lost, ENCRYPTION_KEY_CHECK=warn starts anyway as a last resort');
    expect(output.split('\n')).toHaveLength(1);
    expect(output).not.toContain('listening on');
  }, 60_000);

  it('starts with that key under ENCRYPTION_KEY_CHECK=warn, warning that it reads none of what is stored', async () => {
    const cli = startCli(
      ['start', '--role', 'api'],
      startEnv({ ENCRYPTION_KEY: otherKey, ENCRYPTION_KEY_CHECK: 'warn' }),
    );
    try {
      await cli.waitForOutput(/listening on/);
      expect(cli.output()).toMatch(
        /WARNING: ENCRYPTION_KEY decrypts none of the 2 adapter configs and webhook secrets checked at start-up, so it is not the key this database was written with; starting anyway \(ENCRYPTION_KEY_CHECK=warn\)\. What was written with the old key stops working: adapter configs/,
      );
    } finally {
      await cli.stop();
    }
  }, 60_000);

  it('starts when some stored rows read with the key, warning with the count of those that do not', async () => {
    // The adapter's config entered again under the new key; the webhook's secret not rotated yet.
    const key = Buffer.from(otherKey, 'base64');
    await ctx.context.database.db
      .update(adapters)
      .set({
        configEncrypted: encryptConfig(
          key,
          { host: '127.0.0.1', port: 2525, secure: false },
          { teamId: team.owner.teamId, adapterId: team.adapterId },
        ),
      })
      .where(eq(adapters.id, team.adapterId));
    const cli = startCli(['start', '--role', 'api'], startEnv({ ENCRYPTION_KEY: otherKey }));
    try {
      await cli.waitForOutput(/listening on/);
      expect(cli.output()).toMatch(
        /ENCRYPTION_KEY does not decrypt 1 of the 2 adapter configs and webhook secrets checked/,
      );
    } finally {
      await cli.stop();
    }
  }, 60_000);

  it('starts with a new key once the rows written with the lost one are deactivated (README "ENCRYPTION_KEY")', async () => {
    const { db } = ctx.context.database;
    await db.update(adapters).set({ isActive: false });
    await db.update(webhooks).set({ isActive: false });
    const cli = startCli(
      ['start', '--role', 'api'],
      startEnv({ ENCRYPTION_KEY: randomBytes(32).toString('base64') }),
    );
    try {
      await cli.waitForOutput(/listening on/);
      expect(cli.output()).not.toMatch(/ENCRYPTION_KEY/);
    } finally {
      await cli.stop();
    }
  }, 60_000);
});

describe('the embedded default with a database and no encryption.key', () => {
  it('refuses to start in one line instead of generating a new key', async () => {
    const dataDir = mkdtempSync(path.join(tmpdir(), 'postwright-lost-key-'));
    try {
      mkdirSync(path.join(dataDir, 'pgdata'));
      writeFileSync(path.join(dataDir, 'pgdata', 'PG_VERSION'), '17\n');
      const { code, output } = await runToExit(['start'], {
        DATA_DIR: dataDir,
        PORT: '0',
        HOST: '127.0.0.1',
        BASE_URL: 'http://localhost:9',
        LOG_LEVEL: 'warn',
      });
      expect(code, output).toBe(1);
      expect(output).toMatch(
        /^Missing .*encryption\.key: the database in .*pgdata was written with the key that file held/,
      );
      expect(output).toContain('ENCRYPTION_KEY_CHECK=warn starts anyway as a last resort');
      expect(output.split('\n')).toHaveLength(1);
      expect(existsSync(path.join(dataDir, 'encryption.key'))).toBe(false);
    } finally {
      rmSync(dataDir, { recursive: true, force: true });
    }
  }, 60_000);
});

describe('ENCRYPTION_KEY_CHECK', () => {
  it('refuses a value other than refuse or warn in one line', async () => {
    const dataDir = mkdtempSync(path.join(tmpdir(), 'postwright-key-check-'));
    try {
      const { code, output } = await runToExit(['start'], {
        DATA_DIR: dataDir,
        PORT: '0',
        HOST: '127.0.0.1',
        BASE_URL: 'http://localhost:9',
        ENCRYPTION_KEY_CHECK: 'skip',
        LOG_LEVEL: 'warn',
      });
      expect(code, output).toBe(1);
      expect(output).toBe('Invalid ENCRYPTION_KEY_CHECK: must be refuse or warn');
    } finally {
      rmSync(dataDir, { recursive: true, force: true });
    }
  }, 60_000);
});

/**
 * The way out for an operator whose encryption.key is truly lost on the embedded default, where
 * the database runs only inside Postwright (no SQL client can deactivate the rows the lost key
 * wrote): ENCRYPTION_KEY_CHECK=warn.
 */
describe('the embedded default after encryption.key was lost, with ENCRYPTION_KEY_CHECK=warn', () => {
  const ORIGIN = 'http://localhost:3998';
  const OWNER = { email: 'lost-key@example.test', password: 'correct horse battery' };
  let dataDir: string;
  const processes: ReturnType<typeof startCli>[] = [];

  beforeAll(() => {
    dataDir = mkdtempSync(path.join(tmpdir(), 'postwright-key-recovery-'));
    // Run as root (CI, containers), PostgreSQL runs as the "postgres" user, which must enter DATA_DIR.
    chmodSync(dataDir, 0o755);
  });
  afterAll(async () => {
    await Promise.all(processes.map((cli) => cli.stop()));
    rmSync(dataDir, { recursive: true, force: true });
  });

  const env = (extra: Record<string, string> = {}) => ({
    DATA_DIR: dataDir,
    PORT: '0',
    HOST: '127.0.0.1',
    BASE_URL: ORIGIN,
    LOG_LEVEL: 'warn',
    SMTP_ALLOW_PRIVATE: 'true',
    ...extra,
  });
  const keyFile = () => path.join(dataDir, 'encryption.key');

  /** `postwright start` on the DATA_DIR, once it listens: the process and a client of it. */
  async function start(extra: Record<string, string> = {}) {
    const cli = startCli(['start'], env(extra));
    processes.push(cli);
    const url = (await cli.waitForOutput(/listening on (http:\/\/\S+)/))[1]!;
    let cookie = '';
    const call = async (method: string, route: string, body?: unknown) => {
      const response = await fetch(`${url}${route}`, {
        method,
        headers: {
          origin: ORIGIN,
          ...(cookie ? { cookie } : {}),
          ...(body === undefined ? {} : { 'content-type': 'application/json' }),
        },
        body: body === undefined ? undefined : JSON.stringify(body),
      });
      const setCookie = response.headers.getSetCookie().map((c) => c.split(';')[0]!);
      if (setCookie.length) cookie = setCookie.join('; ');
      const text = await response.text();
      return { status: response.status, text, body: text ? JSON.parse(text) : undefined };
    };
    return { cli, call };
  }

  it('starts with a new key file, warning what stops working; re-entered configs then read without it', async () => {
    // An installation with an adapter, its key then lost.
    const first = await start();
    const token = (await first.cli.waitForOutput(/\/setup\?token=([A-Za-z0-9_-]+)/))[1]!;
    const setup = await first.call('POST', '/api/auth/setup', {
      token,
      name: 'Lost Key',
      teamName: 'Acme',
      ...OWNER,
    });
    expect(setup.status, setup.text).toBe(201);
    const adapter = await first.call('POST', '/api/adapters', {
      name: 'Local',
      type: 'smtp',
      config: { host: '127.0.0.1', port: 2525, secure: false },
      defaultFrom: 'Acme <hello@acme.test>',
    });
    expect(adapter.status, adapter.text).toBe(201);
    const adapterId = adapter.body.data.id as string;
    expect(await first.cli.stop()).toBe(0);
    const lostKey = readFileSync(keyFile(), 'utf8');
    rmSync(keyFile());

    const refused = await runToExit(['start'], env());
    expect(refused.code, refused.output).toBe(1);
    expect(refused.output).toMatch(/^Missing .*encryption\.key: .*ENCRYPTION_KEY_CHECK=warn starts anyway/);
    expect(existsSync(keyFile())).toBe(false);

    const recovered = await start({ ENCRYPTION_KEY_CHECK: 'warn' });
    const output = recovered.cli.output();
    expect(output).toContain(
      `WARNING: ${keyFile()} was missing next to the database in ${path.join(dataDir, 'pgdata')}; ENCRYPTION_KEY_CHECK=warn generated a new key into it.`,
    );
    expect(output).toContain(
      `WARNING: ${keyFile()} decrypts none of the 1 adapter configs and webhook secrets checked at start-up`,
    );
    expect(output).toMatch(
      /adapter configs .*webhook secrets .*sessions .*provider-event URLs .*tracking links/,
    );
    const newKey = readFileSync(keyFile(), 'utf8');
    expect(Buffer.from(newKey.trim(), 'base64')).toHaveLength(32);
    expect(newKey).not.toBe(lostKey);

    // The operator signs in again and enters the adapter's configuration again.
    const signIn = await recovered.call('POST', '/api/auth/sign-in/email', OWNER);
    expect(signIn.status, signIn.text).toBe(200);
    const unreadable = await recovered.call('GET', `/api/adapters/${adapterId}`);
    expect([unreadable.status, unreadable.body.error.details.reason]).toEqual([409, 'CONFIG_UNREADABLE']);
    const reentered = await recovered.call('PUT', `/api/adapters/${adapterId}`, {
      config: { host: '127.0.0.1', port: 2526, secure: false },
    });
    expect(reentered.status, reentered.text).toBe(200);
    expect(await recovered.cli.stop()).toBe(0);

    // From then on the default (refuse) starts on the new key, without a warning.
    const after = await start();
    expect(after.cli.output()).not.toMatch(/WARNING|encryption\.key/);
    expect(await after.call('POST', '/api/auth/sign-in/email', OWNER)).toMatchObject({ status: 200 });
    const read = await after.call('GET', `/api/adapters/${adapterId}`);
    expect(read.body.data.config).toMatchObject({ host: '127.0.0.1', port: 2526 });
  }, 180_000);
});
