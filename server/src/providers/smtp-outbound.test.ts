import { type AddressInfo, createServer, type Server, type Socket } from 'node:net';
import type { SMTPServerOptions } from 'smtp-server';
import { afterEach, describe, expect, it } from 'vitest';
import { closedPort, startTestSmtpServer } from '../../test/helpers/smtp-server.ts';
import { classifySmtpError, createSmtpProvider, type SmtpProviderOptions } from './smtp.ts';
import { type EmailProvider, type OutgoingEmail, ProviderError } from './types.ts';

/**
 * Issue #8: the SMTP provider connects only where the outbound policy allows, insists on TLS
 * before sending credentials, and reports failures in sentences of ours, never the server's bytes.
 */

const cleanups: (() => Promise<void>)[] = [];
afterEach(async () => {
  // Providers first (they were put in front), so no pooled connection keeps a server's close waiting.
  for (const cleanup of cleanups.splice(0)) await cleanup();
});

const allowPrivate: SmtpProviderOptions = { outbound: { allowPrivate: true } };

/** A provider for 127.0.0.1 (by default), closed after the test so its pooled connection ends. */
function provider(
  config: {
    host?: string;
    port: number;
    secure?: boolean;
    username?: string;
    password?: string;
    tls?: 'auto' | 'none';
  },
  options: SmtpProviderOptions = allowPrivate,
): EmailProvider {
  const created = createSmtpProvider({ host: '127.0.0.1', ...config }, options);
  cleanups.unshift(() => created.close());
  return created;
}

async function smtpServer(options: Partial<SMTPServerOptions> = {}) {
  const server = await startTestSmtpServer(options);
  cleanups.push(() => server.close());
  return server;
}

/** A plain TCP server that runs `onConnection` for each client and counts them. */
async function tcpServer(
  onConnection: (socket: Socket) => void,
): Promise<{ port: number; connections: number }> {
  const state = { port: 0, connections: 0 };
  const sockets = new Set<Socket>();
  const server: Server = createServer((socket) => {
    state.connections += 1;
    sockets.add(socket);
    socket.on('error', () => {});
    onConnection(socket);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  state.port = (server.address() as AddressInfo).port;
  cleanups.push(async () => {
    for (const socket of sockets) socket.destroy();
    await new Promise<void>((resolve) => server.close(() => resolve()));
  });
  return state;
}

const email: OutgoingEmail = {
  from: 'sender@example.com',
  to: ['alice@example.com'],
  subject: 'Hello',
  html: '<p>Hello</p>',
  text: 'Hello',
};

async function sendError(p: EmailProvider): Promise<ProviderError> {
  const error = await p.send(email).then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(error).toBeInstanceOf(ProviderError);
  return error as ProviderError;
}

describe('smtp provider: outbound policy', () => {
  it('refuses loopback by default, permanently, naming SMTP_ALLOW_PRIVATE, without connecting', async () => {
    const server = await tcpServer((socket) => socket.write('220 ready\r\n'));
    for (const host of ['127.0.0.1', 'localhost']) {
      const error = await sendError(provider({ host, port: server.port }, {}));
      expect(error.permanent).toBe(true);
      expect(error.providerCode).toBe('EOUTBOUND');
      expect(error.message).toContain('Set SMTP_ALLOW_PRIVATE=true');
      const verified = await provider({ host, port: server.port }, {}).verify();
      expect(verified).toEqual({ success: false, message: error.message });
    }
    expect(server.connections).toBe(0);
  });

  it('refuses a metadata address even with SMTP_ALLOW_PRIVATE', async () => {
    const result = await provider({ host: '169.254.169.254', port: 25 }).verify();
    expect(result).toEqual({
      success: false,
      message:
        'Refused to connect to 169.254.169.254: 169.254.169.254 is a cloud metadata address, which is never allowed',
    });
  });

  it('delivers to loopback when the policy allows private addresses', async () => {
    const server = await smtpServer();
    await provider({ port: server.port }).send(email);
    expect(server.messages).toHaveLength(1);
  });
});

describe('smtp provider: failures in our words, not the server’s', () => {
  it('never echoes a non-SMTP banner (an SSH server)', async () => {
    const server = await tcpServer((socket) => socket.write('SSH-2.0-OpenSSH_9.6 Ubuntu-3ubuntu13\r\n'));
    const result = await provider({ port: server.port }).verify();
    expect(result).toEqual({
      success: false,
      message: `127.0.0.1:${server.port} did not answer as an SMTP server`,
    });
    const error = await sendError(provider({ port: server.port }));
    expect(error.message).not.toMatch(/SSH|OpenSSH|Ubuntu/);
  });

  it('names the reply code of a refused greeting, not its text', async () => {
    const server = await tcpServer((socket) =>
      socket.end('554 internal-relay-7.corp.example says go away\r\n'),
    );
    const { message } = await provider({ port: server.port }).verify();
    expect(message).toBe(
      `The SMTP server at 127.0.0.1:${server.port} refused the session (permanent): 554 transaction failed`,
    );
  });

  it('gives the reply code, enhanced status and standard phrase of a refused recipient, not its text', async () => {
    const server = await smtpServer({
      hideENHANCEDSTATUSCODES: false,
      onRcptTo: (_address, _session, callback) =>
        callback(
          Object.assign(new Error('No such user in ldap://10.0.0.9/ou=people'), { responseCode: 550 }),
        ),
    });
    const error = await sendError(provider({ port: server.port }));
    expect(error.permanent).toBe(true);
    expect(error.providerCode).toBe('550');
    expect(error.message).toMatch(
      /^SMTP server rejected the message \(permanent\): 550 (5\.\d+\.\d+ )?mailbox unavailable$/,
    );
    expect(error.message).not.toContain('ldap');
  });

  it('says the connection was refused for a closed port', async () => {
    const port = await closedPort();
    const error = await sendError(provider({ port }));
    expect(error.permanent).toBe(false);
    expect(error.message).toBe(`Connection refused by 127.0.0.1:${port}`);
  });

  it('says it timed out for a server that accepts and stays silent, as for one that never answers', async () => {
    const server = await tcpServer(() => {});
    const result = await provider(
      { port: server.port },
      { ...allowPrivate, timeouts: { greeting: 300 } },
    ).verify();
    expect(result).toEqual({
      success: false,
      message: `Timed out waiting for the SMTP server at 127.0.0.1:${server.port}`,
    });
  });

  it('words a connect timeout (filtered port) exactly as a greeting timeout', () => {
    const target = { host: 'smtp.example.com', port: 587 };
    const connectTimeout = Object.assign(new Error('Connection to smtp.example.com:587 timed out'), {
      code: 'ETIMEDOUT',
    });
    const greetingTimeout = Object.assign(new Error('Greeting never received'), {
      code: 'ETIMEDOUT',
      timeoutType: 'GREETING_TIMEOUT',
    });
    for (const error of [connectTimeout, greetingTimeout]) {
      expect(classifySmtpError(error, target)).toMatchObject({
        message: 'Timed out waiting for the SMTP server at smtp.example.com:587',
        permanent: false,
      });
    }
  });

  it('says authentication failed with the reply code, not the server text', async () => {
    const server = await smtpServer({
      disabledCommands: [],
      onAuth: (_auth, _session, callback) => callback(new Error('Invalid login for tenant acme-internal')),
    });
    const error = await sendError(
      provider(
        { port: server.port, username: 'u', password: 'wrong' },
        { ...allowPrivate, rejectUnauthorized: false },
      ),
    );
    expect(error.permanent).toBe(true);
    expect(error.message).toBe(
      `SMTP authentication failed at 127.0.0.1:${server.port}: 535 authentication credentials invalid`,
    );
  });
});

describe('smtp provider: implicit TLS over the policy-checked socket', () => {
  it('speaks TLS from the first byte with secure: true', async () => {
    const server = await smtpServer({ secure: true });
    await provider({ port: server.port, secure: true }, { ...allowPrivate, rejectUnauthorized: false }).send(
      email,
    );
    expect(server.messages).toHaveLength(1);
  });

  it("still verifies the server's certificate, and says so in a fixed sentence", async () => {
    const server = await smtpServer({ secure: true });
    const error = await sendError(provider({ port: server.port, secure: true }));
    expect(error.message).toMatch(
      new RegExp(
        `^TLS with 127\\.0\\.0\\.1:${server.port} failed: the server's certificate is not trusted \\([A-Z_]+\\)$`,
      ),
    );
    expect(server.messages).toHaveLength(0);
  });
});

describe('smtp provider: credentials only over TLS (requireTLS)', () => {
  /** A server without STARTTLS (as after a man-in-the-middle strips it) that accepts AUTH in plaintext. */
  async function plaintextAuthServer() {
    const logins: string[] = [];
    const server = await smtpServer({
      disabledCommands: ['STARTTLS'],
      allowInsecureAuth: true,
      onAuth(auth, _session, callback) {
        logins.push(`${auth.username}:${auth.password}`);
        callback(null, { user: auth.username });
      },
    });
    return { server, logins };
  }

  it('refuses to send credentials when the server does not offer STARTTLS', async () => {
    const { server, logins } = await plaintextAuthServer();
    const error = await sendError(provider({ port: server.port, username: 'u', password: 's3cret' }));
    expect(error.permanent).toBe(true);
    expect(error.message).toBe(
      `127.0.0.1:${server.port} refused STARTTLS; credentials are only sent over TLS (set "tls": "none" to allow plaintext on a lab server)`,
    );
    expect(logins).toEqual([]);
    expect(server.messages).toHaveLength(0);
  });

  it('sends them in plaintext only with tls: "none"', async () => {
    const { server, logins } = await plaintextAuthServer();
    await provider({ port: server.port, username: 'u', password: 's3cret', tls: 'none' }).send(email);
    expect(logins).toEqual(['u:s3cret']);
    expect(server.messages).toHaveLength(1);
  });

  it('still sends without credentials over a server without STARTTLS (opportunistic)', async () => {
    const server = await smtpServer();
    await provider({ port: server.port }).send(email);
    expect(server.messages).toHaveLength(1);
  });

  it('authenticates after STARTTLS when the server offers it', async () => {
    const logins: boolean[] = [];
    const server = await smtpServer({
      disabledCommands: [],
      onAuth(auth, session, callback) {
        logins.push(session.secure);
        callback(null, { user: auth.username });
      },
    });
    await provider(
      { port: server.port, username: 'u', password: 's3cret' },
      { ...allowPrivate, rejectUnauthorized: false },
    ).send(email);
    expect(logins).toEqual([true]);
  });
});
