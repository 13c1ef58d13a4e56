import type { AddressInfo } from 'node:net';
import { createServer } from 'node:net';
import { type AddressObject, simpleParser } from 'mailparser';
import { SMTPServer, type SMTPServerOptions, type SMTPServerSession } from 'smtp-server';
import { afterEach, describe, expect, it } from 'vitest';
import { createSmtpProvider, smtpConfigSchema } from './smtp.ts';
import { type EmailProvider, type OutgoingEmail, ProviderError } from './types.ts';

interface Received {
  raw: Buffer;
  session: SMTPServerSession;
}

interface TestServer {
  port: number;
  received: Received[];
  connections: number;
  errors: Error[];
}

const cleanups: (() => Promise<void>)[] = [];

afterEach(async () => {
  await Promise.all(cleanups.splice(0).map((cleanup) => cleanup()));
});

/** A real SMTP server on 127.0.0.1, closed after the test; `overrides` replace the defaults. */
async function startServer(overrides: Partial<SMTPServerOptions> = {}): Promise<TestServer> {
  const state: TestServer = { port: 0, received: [], connections: 0, errors: [] };
  const server = new SMTPServer({
    disabledCommands: ['STARTTLS', 'AUTH'],
    logger: false,
    onConnect(_session, callback) {
      state.connections += 1;
      callback();
    },
    onData(stream, session, callback) {
      const chunks: Buffer[] = [];
      stream.on('data', (chunk: Buffer) => chunks.push(chunk));
      stream.on('end', () => {
        state.received.push({ raw: Buffer.concat(chunks), session: structuredClone(session) });
        callback();
      });
    },
    ...overrides,
  });
  // Without a listener, a failed handshake's `error` event would kill the test process.
  server.on('error', (error) => state.errors.push(error));
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  state.port = (server.server.address() as AddressInfo).port;
  cleanups.push(() => new Promise<void>((resolve) => server.close(() => resolve())));
  return state;
}

/** A provider for the local test server: loopback needs the policy's allowPrivate (SMTP_ALLOW_PRIVATE). */
function provider(
  port: number,
  extra: { username?: string; password?: string; tls?: 'auto' | 'none'; rejectUnauthorized?: boolean } = {},
) {
  const { rejectUnauthorized, ...settings } = extra;
  const created = createSmtpProvider(
    { host: '127.0.0.1', port, ...settings },
    {
      outbound: { allowPrivate: true },
      ...(rejectUnauthorized === undefined ? {} : { rejectUnauthorized }),
    },
  );
  cleanups.push(() => created.close());
  return created;
}

function email(overrides: Partial<OutgoingEmail> = {}): OutgoingEmail {
  return {
    from: '"Postwright" <sender@example.com>',
    to: ['alice@example.com'],
    subject: 'Hello there',
    html: '<p>Hello <strong>Alice</strong></p>',
    text: 'Hello Alice',
    ...overrides,
  };
}

async function sendError(p: EmailProvider, message = email()): Promise<ProviderError> {
  const error = await p.send(message).then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(error).toBeInstanceOf(ProviderError);
  return error as ProviderError;
}

function addresses(field: AddressObject | AddressObject[] | undefined): string[] {
  const list = Array.isArray(field) ? field : field ? [field] : [];
  return list.flatMap((a) => a.value.map((v) => v.address ?? ''));
}

/** A port on 127.0.0.1 that nothing listens on. */
async function closedPort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  await new Promise<void>((resolve) => server.close(() => resolve()));
  return port;
}

describe('smtp provider: send', () => {
  it('delivers a MIME message with From, To, Subject, HTML and text parts, headers and attachments', async () => {
    const server = await startServer();
    const result = await provider(server.port).send(
      email({
        to: ['alice@example.com', 'bob@example.com'],
        headers: { 'X-Postwright-Email-Id': 'eml_123' },
        messageId: '<eml_123@postwright.test>',
        attachments: [
          { filename: 'invoice.pdf', content: Buffer.from('%PDF-1.4 test'), contentType: 'application/pdf' },
        ],
      }),
    );

    expect(server.received).toHaveLength(1);
    const [message] = server.received;
    expect(message?.session.envelope.rcptTo.map((r) => r.address)).toEqual([
      'alice@example.com',
      'bob@example.com',
    ]);
    const parsed = await simpleParser(message!.raw);
    expect(parsed.from?.value).toEqual([{ address: 'sender@example.com', name: 'Postwright' }]);
    expect(addresses(parsed.to)).toEqual(['alice@example.com', 'bob@example.com']);
    expect(parsed.subject).toBe('Hello there');
    expect(parsed.html).toContain('<p>Hello <strong>Alice</strong></p>');
    expect(parsed.text?.trim()).toBe('Hello Alice');
    expect(parsed.headers.get('x-postwright-email-id')).toBe('eml_123');
    expect(parsed.messageId).toBe('<eml_123@postwright.test>');
    expect(parsed.attachments.map((a) => [a.filename, a.contentType, a.content.toString()])).toEqual([
      ['invoice.pdf', 'application/pdf', '%PDF-1.4 test'],
    ]);
    // smtp-server's reply ("250 OK: message queued") names no queue id: the Message-ID is used.
    expect(result.providerMessageId).toBe('<eml_123@postwright.test>');
  });

  it("returns the server's queue id when its final reply names one", async () => {
    const server = await startServer({
      onData(stream, _session, callback) {
        stream.resume();
        stream.on('end', () => callback(null, '2.0.0 Ok: queued as 4F1C52A0B3'));
      },
    });
    const result = await provider(server.port).send(email());
    expect(result.providerMessageId).toBe('4F1C52A0B3');
  });

  it("reuses one pooled connection beyond nodemailer's default of 100 messages per connection", async () => {
    const server = await startServer();
    const p = provider(server.port);
    for (let i = 0; i < 101; i += 1) await p.send(email({ subject: `message ${i}` }));
    expect(server.received).toHaveLength(101);
    expect(server.connections).toBe(1);
  });
});

describe('smtp provider: authentication', () => {
  function authServer() {
    return startServer({
      // STARTTLS offered (smtp-server's self-signed certificate): credentials require TLS.
      disabledCommands: [],
      onAuth(auth, _session, callback) {
        if (auth.username === 'postwright' && auth.password === 's3cret')
          return callback(null, { user: 'postwright' });
        return callback(new Error('Invalid username or password'));
      },
    });
  }

  it('logs in with username and password', async () => {
    const server = await authServer();
    await provider(server.port, {
      username: 'postwright',
      password: 's3cret',
      rejectUnauthorized: false,
    }).send(email());
    expect(server.received).toHaveLength(1);
    expect(server.received[0]?.session.user).toBe('postwright');
  });

  it('fails permanently on a wrong password, sending nothing', async () => {
    const server = await authServer();
    const error = await sendError(
      provider(server.port, { username: 'postwright', password: 'wrong', rejectUnauthorized: false }),
    );
    expect(error.permanent).toBe(true);
    expect(error.providerCode).toBe('EAUTH');
    expect(server.received).toHaveLength(0);
  });
});

describe('smtp provider: authentication (temporary)', () => {
  it('a 454 temporary authentication failure (RFC 4954) is transient', async () => {
    const server = await startServer({
      // STARTTLS offered (smtp-server's self-signed certificate): credentials require TLS.
      disabledCommands: [],
      onAuth: (_auth, _session, callback) =>
        callback(Object.assign(new Error('Temporary authentication failure'), { responseCode: 454 })),
    });
    const error = await sendError(
      provider(server.port, { username: 'postwright', password: 's3cret', rejectUnauthorized: false }),
    );
    expect(error.permanent).toBe(false);
    expect(error.providerCode).toBe('EAUTH');
  });
});

describe('smtp provider: error classification (RFC 5321 reply classes)', () => {
  function rejectingServer(responseCode: number) {
    return startServer({
      onRcptTo(_address, _session, callback) {
        callback(Object.assign(new Error('Recipient refused'), { responseCode }));
      },
    });
  }

  it('a 451 reply to RCPT TO is transient', async () => {
    const server = await rejectingServer(451);
    const error = await sendError(provider(server.port));
    expect(error.permanent).toBe(false);
    expect(error.providerCode).toBe('451');
  });

  it('a 550 reply to RCPT TO is permanent', async () => {
    const server = await rejectingServer(550);
    const error = await sendError(provider(server.port));
    expect(error.permanent).toBe(true);
    expect(error.providerCode).toBe('550');
  });

  it('a refused connection is transient', async () => {
    const error = await sendError(provider(await closedPort()));
    expect(error.permanent).toBe(false);
    expect(error.providerCode).toMatch(/^E/);
  });
});

describe('smtp provider: STARTTLS', () => {
  // smtp-server offers STARTTLS with its bundled self-signed certificate.
  function starttlsServer() {
    return startServer({ disabledCommands: ['AUTH'] });
  }

  it('upgrades with STARTTLS when offered', async () => {
    const server = await starttlsServer();
    await provider(server.port, { rejectUnauthorized: false }).send(email());
    expect(server.received).toHaveLength(1);
    expect(server.received[0]?.session.secure).toBe(true);
  });

  it('verifies the certificate by default and sends nothing over an untrusted one', async () => {
    const server = await starttlsServer();
    const error = await sendError(provider(server.port));
    expect(error.permanent).toBe(false);
    expect(server.received).toHaveLength(0);
  });
});

describe('smtp provider: verify', () => {
  it('succeeds against a reachable server with valid credentials', async () => {
    const server = await startServer({
      disabledCommands: [],
      onAuth: (auth, _session, callback) =>
        auth.password === 's3cret'
          ? callback(null, { user: auth.username })
          : callback(new Error('Invalid login')),
    });
    expect(
      await provider(server.port, { username: 'u', password: 's3cret', rejectUnauthorized: false }).verify(),
    ).toEqual({
      success: true,
      message: expect.stringContaining('authenticated'),
    });
    const failed = await provider(server.port, {
      username: 'u',
      password: 'nope',
      rejectUnauthorized: false,
    }).verify();
    expect(failed.success).toBe(false);
    expect(failed.message).toMatch(/authentication failed/i);
  });

  it('reports an unreachable server without throwing', async () => {
    const result = await provider(await closedPort()).verify();
    expect(result.success).toBe(false);
    expect(result.message).toMatch(/ECONNREFUSED|connect/i);
  });
});

describe('smtp config: host', () => {
  const hostIssue = (host: string) => {
    const result = smtpConfigSchema.safeParse({ host, port: 25 });
    return result.success
      ? undefined
      : result.error.issues.find((issue) => issue.path[0] === 'host')?.message;
  };

  // Review finding, session 18: NUL, control and bidi characters were accepted as a host.
  it.each([
    ['NUL', '\u0000'],
    ['a control character', 'smtp\u0007.example.test'],
    ['a right-to-left override', '\u202Eevil.test'],
    ['a space inside', 'smtp example.test'],
    ['a port', 'smtp.example.test:25'],
    ['a URL', 'smtp://smtp.example.test'],
    ['an empty label', 'smtp..example.test'],
    ['a label over 63 characters', `${'a'.repeat(64)}.example.test`],
    ['a name over 253 characters', `${'a.'.repeat(127)}ab`],
    ['a name outside ASCII', 'bücher.example'],
    ['an IPv6 address in brackets', '[::1]'],
    ['nothing', '  '],
  ])('refuses %s', (_, host) => {
    expect(hostIssue(host)).toBeDefined();
  });

  it.each([
    'smtp.example.test',
    'localhost',
    'mail_relay',
    'smtp.example.test.',
    'xn--bcher-kva.example',
    '127.0.0.1',
    '::1',
    '2001:db8::25',
  ])('accepts %s', (host) => {
    expect(hostIssue(host)).toBeUndefined();
  });

  it('trims surrounding spaces', () => {
    expect(smtpConfigSchema.parse({ host: ' smtp.example.test ', port: 25 }).host).toBe('smtp.example.test');
  });
});
