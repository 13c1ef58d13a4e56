import { chmodSync, existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, afterEach, describe, expect, it } from 'vitest';
import { processInfo } from '../src/db/embedded-postgres-recovery.ts';
import { waitFor } from './helpers/app.ts';
import { type CliProcess, startCli } from './helpers/process.ts';
import { startTestSmtpServer, type TestSmtpServer } from './helpers/smtp-server.ts';

const ORIGIN = 'http://localhost:3999';
const OWNER = { email: 'ada@example.test', password: 'correct horse battery' };

/** A small HTTP client for a CLI-started server, carrying the session cookie and our Origin. */
function client(baseUrl: string) {
  let cookie = '';
  return {
    async call(method: string, url: string, body?: unknown, headers: Record<string, string> = {}) {
      const response = await fetch(`${baseUrl}${url}`, {
        method,
        headers: {
          origin: ORIGIN,
          ...(cookie ? { cookie } : {}),
          ...(body === undefined ? {} : { 'content-type': 'application/json' }),
          ...headers,
        },
        body: body === undefined ? undefined : JSON.stringify(body),
        redirect: 'manual',
      });
      const setCookie = response.headers.getSetCookie().map((c) => c.split(';')[0]!);
      if (setCookie.length) cookie = setCookie.join('; ');
      const text = await response.text();
      const isJson = response.headers.get('content-type')?.includes('json');
      return { status: response.status, body: isJson && text ? JSON.parse(text) : undefined, text };
    },
  };
}

/** True while `pid` is a running (not zombie) process. */
async function isRunning(pid: number): Promise<boolean> {
  const info = await processInfo(pid);
  return info !== undefined && info.state !== 'Z';
}

describe('restart on the embedded database (npm start with nothing configured)', () => {
  const processes: CliProcess[] = [];
  /** What afterAll cleans up of each installation. */
  const installations: Array<{
    dataDir: string;
    lockFile: string;
    postmasterPid: () => number;
    smtp: TestSmtpServer;
  }> = [];

  /**
   * An installation of the case's own (CONVENTIONS.md: every test its own team; here its own
   * DATA_DIR, embedded server and SMTP sink): `postwright start --role api` on a new DATA_DIR, set
   * up through its first-run token with an API key, an SMTP adapter and the "restart" template.
   * Returns the running API process (`api`) with the helpers the cases share.
   */
  async function install() {
    const dataDir = mkdtempSync(path.join(tmpdir(), 'postwright-restart-'));
    // Run as root (CI, containers), PostgreSQL runs as the "postgres" user, which must enter DATA_DIR.
    chmodSync(dataDir, 0o755);
    const lockFile = path.join(dataDir, 'pgdata', 'postmaster.pid');
    const postmasterPid = () => Number.parseInt(readFileSync(lockFile, 'utf8').split('\n')[0]!, 10);
    const smtp = await startTestSmtpServer();
    // SMTP_ALLOW_PRIVATE: the test SMTP server listens on 127.0.0.1.
    const env = {
      DATA_DIR: dataDir,
      PORT: '0',
      HOST: '127.0.0.1',
      BASE_URL: ORIGIN,
      LOG_LEVEL: 'warn',
      SMTP_ALLOW_PRIVATE: 'true',
    };
    const accepted: string[] = [];
    const installation = { dataDir, lockFile, postmasterPid, smtp, env, accepted, apiKey: '' };
    installations.push(installation);

    const start = async (role: 'api' | 'all') => {
      const cli = startCli(role === 'api' ? ['start', '--role', 'api'] : ['start'], env);
      processes.push(cli);
      const baseUrl = (await cli.waitForOutput(/listening on (http:\/\/[^\s]+)/))[1]!;
      return { cli, http: client(baseUrl) };
    };
    const sendSome = async (http: ReturnType<typeof client>, count: number) => {
      for (let i = 0; i < count; i++) {
        const n = accepted.length;
        const sent = await http.call(
          'POST',
          '/api/v1/send',
          { templateId: 'restart', to: `user${n}@example.test`, variables: { first_name: `N${n}` } },
          { 'x-api-key': installation.apiKey },
        );
        expect(sent.status, sent.text).toBe(202);
        accepted.push(sent.body.data.id);
      }
    };
    /** Signs in again and checks every row written before the crash is there, then that all emails go out. */
    const expectEverythingKeptAndSent = async (http: ReturnType<typeof client>) => {
      const signIn = await http.call('POST', '/api/auth/sign-in/email', OWNER);
      expect(signIn.status, signIn.text).toBe(200);
      const templates = await http.call('GET', '/api/templates');
      expect(templates.body.data.items.map((t: { slug: string }) => t.slug)).toEqual(['restart']);
      const adapters = await http.call('GET', '/api/adapters');
      expect(adapters.body.data.map((a: { name: string }) => a.name)).toEqual(['Local']);
      const logs = await http.call('GET', '/api/logs?pageSize=100');
      expect(logs.body.data.items.map((l: { id: string }) => l.id).sort()).toEqual([...accepted].sort());
      for (const id of accepted) {
        await waitFor(
          async () => {
            const status = await http.call('GET', `/api/v1/${id}/status`, undefined, {
              'x-api-key': installation.apiKey,
            });
            return status.body?.data?.status === 'sent' ? true : undefined;
          },
          60_000,
          `email ${id} to be sent`,
        );
      }
      const received = smtp.messages.map((m) => m.parsed.subject).sort();
      expect(received).toEqual(accepted.map((_, n) => `Hello N${n}`).sort());
    };

    const api = startCli(['start', '--role', 'api'], env);
    processes.push(api);
    const setupToken = (await api.waitForOutput(/\/setup\?token=([A-Za-z0-9_-]+)/))[1]!;
    const baseUrl = (await api.waitForOutput(/listening on (http:\/\/[^\s]+)/))[1]!;
    const http = client(baseUrl);
    const setup = await http.call('POST', '/api/auth/setup', {
      token: setupToken,
      name: 'Ada Owner',
      teamName: 'Acme',
      ...OWNER,
    });
    expect(setup.status, setup.text).toBe(201);
    const key = await http.call('POST', '/api/api-keys', { name: 'restart' });
    expect(key.status, key.text).toBe(201);
    installation.apiKey = key.body.data.key;
    const adapter = await http.call('POST', '/api/adapters', {
      name: 'Local',
      type: 'smtp',
      config: { host: '127.0.0.1', port: smtp.port, secure: false },
      defaultFrom: 'Acme <hello@acme.test>',
    });
    expect(adapter.status, adapter.text).toBe(201);
    const template = await http.call('POST', '/api/templates', {
      name: 'Restart',
      subject: 'Hello {{ first_name }}',
      designJson: {
        root: { type: 'EmailLayout', data: { childrenIds: ['t'] } },
        t: { type: 'Text', data: { props: { text: 'Hi {{ first_name }}' } } },
      },
    });
    expect(template.status, template.text).toBe(201);
    return {
      ...installation,
      api: { cli: api, http },
      start,
      sendSome,
      expectEverythingKeptAndSent,
      /** Stops the set-up API process cleanly (exit code 0). */
      stopApi: async () => expect(await api.stop('SIGTERM')).toBe(0),
    };
  }

  // A test that failed half-way must not leave its process holding a DATA_DIR.
  afterEach(async () => {
    await Promise.all(processes.splice(0).map((p) => p.stop('SIGTERM')));
  });
  afterAll(async () => {
    for (const { lockFile, postmasterPid, smtp, dataDir } of installations) {
      // A failed test may have left the embedded server of a killed CLI running.
      if (existsSync(lockFile)) {
        const pid = postmasterPid();
        if (await isRunning(pid)) {
          process.kill(pid, 'SIGQUIT');
          await waitFor(async () => ((await isRunning(pid)) ? undefined : true), 10_000, 'the server to die');
        }
      }
      await smtp.close();
      rmSync(dataDir, { recursive: true, force: true });
    }
  });

  it('keeps every row and accepted send across a kill -9 of Postwright, stops the orphaned server, then delivers all', async () => {
    const { api, smtp, postmasterPid, lockFile, start, sendSome, expectEverythingKeptAndSent } =
      await install();
    const { http } = api;
    expect((await http.call('GET', '/docs/')).status).toBe(200);
    expect((await http.call('GET', '/docs/json')).body.openapi).toMatch(/^3\./);
    await sendSome(http, 5);

    // The API process has no worker: kill it hard, as a crash would. Its PostgreSQL runs in its own
    // session, so it outlives it, orphaned.
    const orphan = postmasterPid();
    await api.cli.stop('SIGKILL');
    expect(smtp.messages).toHaveLength(0);
    expect(await isRunning(orphan)).toBe(true);

    const all = await start('all');
    expect(all.cli.output()).toContain(`Stopping the PostgreSQL server (PID ${orphan})`);
    expect(all.cli.output()).not.toContain('/setup?token=');
    expect(await isRunning(orphan)).toBe(false);
    const server = postmasterPid();
    expect(server).not.toBe(orphan);

    await expectEverythingKeptAndSent(all.http);

    // A clean stop: exit code 0, the server shut down (its lock file gone).
    expect(await all.cli.stop('SIGTERM')).toBe(0);
    expect(await isRunning(server)).toBe(false);
    expect(existsSync(lockFile)).toBe(false);
  }, 300_000);

  it('recovers when Postwright and its PostgreSQL were both killed (stale postmaster.pid)', async () => {
    const { api, postmasterPid, start, sendSome, expectEverythingKeptAndSent } = await install();
    await sendSome(api.http, 2);
    const server = postmasterPid();
    await api.cli.stop('SIGKILL');
    process.kill(server, 'SIGKILL');
    await waitFor(async () => ((await isRunning(server)) ? undefined : true), 10_000, 'the server to die');
    expect(postmasterPid()).toBe(server);

    const all = await start('all');
    expect(postmasterPid()).not.toBe(server);
    await expectEverythingKeptAndSent(all.http);
    expect(await all.cli.stop('SIGTERM')).toBe(0);
  }, 300_000);

  it('on Ctrl-C (SIGINT to the process group) stops PostgreSQL only after closing every connection', async () => {
    const { env, dataDir, postmasterPid, sendSome, expectEverythingKeptAndSent, stopApi } = await install();
    await stopApi();
    const cli = startCli(['start'], env, { ownProcessGroup: true });
    processes.push(cli);
    const baseUrl = (await cli.waitForOutput(/listening on (http:\/\/[^\s]+)/))[1]!;
    const http = client(baseUrl);
    // Issue #13: `postwright start` on the embedded default serves the built dashboard (npm ci's
    // `prepare` builds web/dist) at `/` and its client routes, e.g. the printed setup link.
    for (const url of ['/', '/setup?token=abc', '/login']) {
      const page = await http.call('GET', url);
      expect(page.status, url).toBe(200);
      expect(page.text, `${url}: the built app (npm run build:web), not the "not built" page`).toContain(
        '<div id="root">',
      );
    }
    // Connections in use: the workers poll, and a request holds one.
    await sendSome(http, 1);
    await expectEverythingKeptAndSent(http);
    const logBefore = readFileSync(path.join(dataDir, 'postgres.log'), 'utf8').length;
    const server = postmasterPid();

    process.kill(-cli.child.pid!, 'SIGINT');
    expect(await cli.stop('SIGCONT')).toBe(0);
    expect(await isRunning(server)).toBe(false);
    const log = readFileSync(path.join(dataDir, 'postgres.log'), 'utf8').slice(logBefore);
    expect(log).toContain('received smart shutdown request');
    // Had the terminal's SIGINT reached PostgreSQL too, it would have cut the open sessions at once
    // (fast shutdown) while Postwright was still draining.
    expect(log, log).not.toContain('terminating connection due to administrator command');
  }, 300_000);

  it('refuses a second process on the same DATA_DIR while the first runs', async () => {
    const { env, start, stopApi } = await install();
    await stopApi();
    const first = await start('all');
    const second = startCli(['start'], { ...env });
    processes.push(second);
    // SIGCONT does not end it: stop() here only waits for the exit code.
    expect(await second.stop('SIGCONT')).toBe(1);
    expect(second.output()).toMatch(/in use by Postwright process \d+: only one process can use DATA_DIR/);
    expect((await first.http.call('GET', '/readyz')).status).toBe(200);
    expect(await first.cli.stop('SIGTERM')).toBe(0);
  }, 300_000);
});
