import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { waitFor } from './helpers/app.ts';
import { type CliProcess, startCli } from './helpers/process.ts';
import { startTestSmtpServer, type TestSmtpServer } from './helpers/smtp-server.ts';

const ORIGIN = 'http://localhost:3999';

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

describe('restart on the embedded database (npm start with nothing configured)', () => {
  const dataDir = mkdtempSync(path.join(tmpdir(), 'postwright-restart-'));
  let smtp: TestSmtpServer;
  const processes: CliProcess[] = [];
  // SMTP_ALLOW_PRIVATE: the test SMTP server listens on 127.0.0.1.
  const env = {
    DATA_DIR: dataDir,
    PORT: '0',
    HOST: '127.0.0.1',
    BASE_URL: ORIGIN,
    LOG_LEVEL: 'warn',
    SMTP_ALLOW_PRIVATE: 'true',
  };

  afterAll(async () => {
    await Promise.all(processes.map((p) => p.stop('SIGKILL')));
    await smtp?.close();
    rmSync(dataDir, { recursive: true, force: true });
  });

  it('keeps every accepted send across a crash before the worker ran, then delivers all', async () => {
    smtp = await startTestSmtpServer();
    const api = startCli(['start', '--role', 'api'], env);
    processes.push(api);
    const setupToken = (await api.waitForOutput(/\/setup\?token=([A-Za-z0-9_-]+)/))[1]!;
    const baseUrl = (await api.waitForOutput(/listening on (http:\/\/[^\s]+)/))[1]!;
    const http = client(baseUrl);

    expect((await http.call('GET', '/docs/')).status).toBe(200);
    expect((await http.call('GET', '/docs/json')).body.openapi).toMatch(/^3\./);
    const setup = await http.call('POST', '/api/auth/setup', {
      token: setupToken,
      name: 'Ada Owner',
      email: 'ada@example.test',
      password: 'correct horse battery',
      teamName: 'Acme',
    });
    expect(setup.status, setup.text).toBe(201);
    const key = await http.call('POST', '/api/api-keys', { name: 'restart' });
    expect(key.status, key.text).toBe(201);
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

    const ids: string[] = [];
    for (let i = 0; i < 5; i++) {
      const sent = await http.call(
        'POST',
        '/api/v1/send',
        { templateId: 'restart', to: `user${i}@example.test`, variables: { first_name: `N${i}` } },
        { 'x-api-key': key.body.data.key },
      );
      expect(sent.status, sent.text).toBe(202);
      ids.push(sent.body.data.id);
    }
    // The API process has no worker: kill it hard, as a crash would.
    await api.stop('SIGKILL');
    expect(smtp.messages).toHaveLength(0);

    const all = startCli(['start'], env);
    processes.push(all);
    const secondUrl = (await all.waitForOutput(/listening on (http:\/\/[^\s]+)/))[1]!;
    expect(all.output()).not.toContain('/setup?token=');
    const second = client(secondUrl);
    for (const id of ids) {
      await waitFor(
        async () => {
          const status = await second.call('GET', `/api/v1/${id}/status`, undefined, {
            'x-api-key': key.body.data.key,
          });
          return status.body?.data?.status === 'sent' ? true : undefined;
        },
        60_000,
        `email ${id} to be sent`,
      );
    }
    const received = smtp.messages.map((m) => m.parsed.subject).sort();
    expect(received).toEqual(['Hello N0', 'Hello N1', 'Hello N2', 'Hello N3', 'Hello N4']);
    expect(await all.stop('SIGTERM')).toBe(0);
  });
});
