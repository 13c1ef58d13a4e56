import { type AddressInfo, createServer, type Server, type Socket } from 'node:net';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { createTestContext, type TestContext, waitFor } from './helpers/app.ts';
import { sessionHeaders, setupOwner, type TeamOwner } from './helpers/auth.ts';
import { buildApiKey, buildSmtpAdapter, buildTemplate, send, simpleDesign } from './helpers/factories.ts';
import { closedPort, startTestSmtpServer, type TestSmtpServer } from './helpers/smtp-server.ts';

/**
 * Issue #8: SMTP adapters are not an SSRF and port-scan tool. Without SMTP_ALLOW_PRIVATE the test
 * endpoint and the worker refuse loopback, private and metadata destinations before connecting;
 * with it, metadata is still refused, and what the endpoint says is ours, never the server's bytes.
 */

const REFUSAL_HINT = 'Set SMTP_ALLOW_PRIVATE=true to allow private destinations (e.g. an internal relay)';

function testAdapterCall(ctx: TestContext, owner: TeamOwner, id: string) {
  return ctx.app.inject({
    method: 'POST',
    url: `/api/adapters/${id}/test`,
    headers: sessionHeaders(ctx.app, owner),
  });
}

/** POST /api/adapters/:id/test for a new adapter with `config`; returns the inner result. */
async function testConfig(ctx: TestContext, owner: TeamOwner, config: Record<string, unknown>) {
  const adapter = await buildSmtpAdapter(ctx.app, owner, 25, { config });
  const response = await testAdapterCall(ctx, owner, adapter.id);
  expect(response.statusCode, response.body).toBe(200);
  return { body: response.body, ...(response.json().data as { success: boolean; message: string }) };
}

/** A TCP server that is not SMTP: it greets every client with an SSH banner. */
async function sshLikeServer(): Promise<{ port: number; close(): Promise<void> }> {
  const sockets = new Set<Socket>();
  const server: Server = createServer((socket) => {
    sockets.add(socket);
    socket.on('error', () => {});
    socket.write('SSH-2.0-OpenSSH_9.6p1 Ubuntu-3ubuntu13.5\r\n');
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    port: (server.address() as AddressInfo).port,
    close: async () => {
      for (const socket of sockets) socket.destroy();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

describe('outbound policy: SMTP_ALLOW_PRIVATE not set', () => {
  let ctx: TestContext;
  let owner: TeamOwner;
  let smtp: TestSmtpServer;
  let connections = 0;

  beforeAll(async () => {
    ctx = await createTestContext('postgres', { SMTP_ALLOW_PRIVATE: '' });
    smtp = await startTestSmtpServer({
      onConnect(_session, callback) {
        connections += 1;
        callback();
      },
    });
  });
  // Every case gets a team of its own (CONVENTIONS.md); the app and database are the file's.
  beforeEach(async () => {
    owner = await setupOwner(ctx.app);
  });
  afterAll(async () => {
    await ctx?.close();
    await smtp?.close();
  });

  it.each([
    ['127.0.0.1', '127.0.0.1 is a loopback address'],
    ['localhost', 'localhost resolves to a loopback address'],
    ['::ffff:127.0.0.1', '::ffff:127.0.0.1 is a loopback address'],
    ['10.20.30.40', '10.20.30.40 is a private-network address'],
    ['192.168.1.1', '192.168.1.1 is a private-network address'],
    ['100.64.0.1', '100.64.0.1 is a carrier-grade NAT address'],
    ['fd00::25', 'fd00::25 is a private-network (unique local) address'],
  ])('the test endpoint refuses %s, naming SMTP_ALLOW_PRIVATE, without connecting', async (host, what) => {
    const before = connections;
    const result = await testConfig(ctx, owner, { host, port: smtp.port });
    expect(result).toMatchObject({
      success: false,
      message: `Refused to connect to ${host}: ${what}. ${REFUSAL_HINT}`,
    });
    expect(connections).toBe(before);
  });

  it('refuses a cloud metadata address, not offering the variable', async () => {
    const result = await testConfig(ctx, owner, { host: '169.254.169.254', port: 80 });
    expect(result).toMatchObject({
      success: false,
      message:
        'Refused to connect to 169.254.169.254: 169.254.169.254 is a cloud metadata address, which is never allowed',
    });
  });

  it('the worker fails a send to a loopback relay at once, naming SMTP_ALLOW_PRIVATE, and delivers nothing', async () => {
    const team = await setupOwner(ctx.app);
    const key = (await buildApiKey(ctx.app, team)).key;
    await buildSmtpAdapter(ctx.app, team, smtp.port);
    const template = await buildTemplate(ctx.app, team, { name: 'Blocked', designJson: simpleDesign('Hi') });
    await ctx.startWorkers();
    const { id } = (await send(ctx.app, key, { templateId: template.id, to: 'a@example.test' })).json().data;
    const log = await waitFor(async () => {
      const response = await ctx.app.inject({
        method: 'GET',
        url: `/api/logs/${id}`,
        headers: sessionHeaders(ctx.app, team),
      });
      const data = response.json().data;
      return data.status === 'queued' ? undefined : data;
    }, 30_000);
    expect(log).toMatchObject({
      status: 'failed',
      attemptCount: 1,
      errorMessage: `Refused to connect to 127.0.0.1: 127.0.0.1 is a loopback address. ${REFUSAL_HINT}`,
    });
    expect(smtp.messages).toHaveLength(0);
  });
});

describe('outbound policy: SMTP_ALLOW_PRIVATE=true (self-hosted internal relay)', () => {
  let ctx: TestContext;
  let owner: TeamOwner;

  beforeAll(async () => {
    ctx = await createTestContext('postgres', { SMTP_ALLOW_PRIVATE: 'true' });
  });
  // Every case gets a team of its own (CONVENTIONS.md); the app and database are the file's.
  beforeEach(async () => {
    owner = await setupOwner(ctx.app);
  });
  afterAll(() => ctx?.close());

  it('connects to a loopback relay', async () => {
    const smtp = await startTestSmtpServer();
    try {
      expect(await testConfig(ctx, owner, { host: 'localhost', port: smtp.port })).toMatchObject({
        success: true,
      });
    } finally {
      await smtp.close();
    }
  });

  it('still refuses cloud metadata addresses, in every spelling', async () => {
    for (const host of ['169.254.169.254', '::ffff:169.254.169.254', '::ffff:a9fe:a9fe', 'fd00:ec2::254']) {
      const result = await testConfig(ctx, owner, { host, port: 80 });
      expect(result.success).toBe(false);
      expect(result.message).toContain('cloud metadata address, which is never allowed');
    }
  });

  it('never echoes a non-SMTP banner', async () => {
    const ssh = await sshLikeServer();
    try {
      const result = await testConfig(ctx, owner, { host: '127.0.0.1', port: ssh.port });
      expect(result).toMatchObject({
        success: false,
        message: `127.0.0.1:${ssh.port} did not answer as an SMTP server`,
      });
      expect(result.body).not.toMatch(/SSH|OpenSSH|Ubuntu/);
    } finally {
      await ssh.close();
    }
  });

  it('says a closed port refused the connection, in a fixed sentence', async () => {
    const port = await closedPort();
    expect(await testConfig(ctx, owner, { host: '127.0.0.1', port })).toMatchObject({
      success: false,
      message: `Connection refused by 127.0.0.1:${port}`,
    });
  });

  it('does not send credentials to a server without STARTTLS unless tls is "none"', async () => {
    const logins: string[] = [];
    const smtp = await startTestSmtpServer({
      disabledCommands: ['STARTTLS'],
      allowInsecureAuth: true,
      onAuth(auth, _session, callback) {
        logins.push(auth.username ?? '');
        callback(null, { user: auth.username });
      },
    });
    try {
      const config = {
        host: '127.0.0.1',
        port: smtp.port,
        username: 'relay-user',
        password: 'Sup3r-Secret-Pw!',
      };
      const refused = await testConfig(ctx, owner, config);
      expect(refused).toMatchObject({
        success: false,
        message: `127.0.0.1:${smtp.port} refused STARTTLS; credentials are only sent over TLS (set "tls": "none" to allow plaintext on a lab server)`,
      });
      expect(logins).toEqual([]);
      const lab = await testConfig(ctx, owner, { ...config, tls: 'none' });
      expect(lab).toMatchObject({ success: true });
      expect(logins).toEqual(['relay-user']);
    } finally {
      await smtp.close();
    }
  });
});
