import { type AddressInfo, createServer, type Socket } from 'node:net';
import { SMTPServer, type SMTPServerOptions } from 'smtp-server';
import { afterEach, describe, expect, it } from 'vitest';
import { createSmtpProvider } from './smtp.ts';
import { type EmailProvider, type OutgoingEmail, ProviderError } from './types.ts';

const anEmail: OutgoingEmail = {
  from: 'a@example.com',
  to: ['b@example.com'],
  subject: 's',
  html: 'h',
  text: 't',
};
const cleanups: (() => Promise<void>)[] = [];
afterEach(async () => {
  await Promise.all(cleanups.splice(0).map((cleanup) => cleanup()));
});

/** A real SMTP server on 127.0.0.1 counting the messages it fully received; `options` override it. */
async function server(options: Partial<SMTPServerOptions>): Promise<{ port: number; received: number }> {
  const state = { port: 0, received: 0 };
  const smtp = new SMTPServer({
    disabledCommands: ['STARTTLS', 'AUTH'],
    logger: false,
    onData(stream, _session, callback) {
      stream.on('data', () => {});
      stream.on('end', () => {
        state.received += 1;
        callback();
      });
    },
    ...options,
  });
  smtp.on('error', () => {});
  await new Promise<void>((resolve) => smtp.listen(0, '127.0.0.1', resolve));
  state.port = (smtp.server.address() as AddressInfo).port;
  cleanups.push(() => new Promise<void>((resolve) => smtp.close(() => resolve())));
  return state;
}

function provider(port: number, maxConnections = 5): EmailProvider {
  const created = createSmtpProvider(
    { host: '127.0.0.1', port, secure: false },
    { maxConnections, outbound: { allowPrivate: true } },
  );
  cleanups.push(() => created.close());
  return created;
}

async function rejection(promise: Promise<unknown>): Promise<ProviderError> {
  const error = await promise.then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(error).toBeInstanceOf(ProviderError);
  return error as ProviderError;
}

const wait = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

describe('SMTP send deadline (signal)', () => {
  it('gives up a send stalled before DATA as transient: nothing can have been accepted', async () => {
    const slow = await server({
      onRcptTo(_address, _session, callback) {
        setTimeout(() => callback(), 1_000);
      },
    });
    const error = await rejection(provider(slow.port).send(anEmail, { signal: AbortSignal.timeout(200) }));
    expect(error).toMatchObject({ permanent: false, ambiguous: false, providerCode: 'EABORT' });
    expect(error.message).toContain('before the message was transmitted');
    await wait(1_200);
    expect(slow.received).toBe(0);
  });

  it('gives up a send whose final reply is late as ambiguous: the server may have the message', async () => {
    let received = 0;
    const late = await server({
      onData(stream, _session, callback) {
        stream.on('data', () => {});
        stream.on('end', () => {
          received += 1;
          setTimeout(() => callback(), 1_000);
        });
      },
    });
    const error = await rejection(provider(late.port).send(anEmail, { signal: AbortSignal.timeout(300) }));
    expect(error).toMatchObject({ permanent: false, ambiguous: true, providerCode: 'EABORT' });
    expect(error.message).toContain('may have been delivered');
    expect(received).toBe(1); // the server had the whole message when the client gave up
  });

  it('gives up a send still waiting for a pooled connection without ever transmitting it', async () => {
    const seen: string[] = [];
    const busy = await server({
      onRcptTo(address, _session, callback) {
        seen.push(address.address);
        setTimeout(() => callback(), address.address === 'first@example.com' ? 800 : 0);
      },
    });
    const pool = provider(busy.port, 1);
    const first = pool.send({ ...anEmail, to: ['first@example.com'] });
    const second = await rejection(
      pool.send({ ...anEmail, to: ['second@example.com'] }, { signal: AbortSignal.timeout(200) }),
    );
    expect(second).toMatchObject({ ambiguous: false, providerCode: 'EABORT' });
    await expect(first).resolves.toMatchObject({ providerMessageId: expect.any(String) });
    await wait(200);
    expect(seen).toEqual(['first@example.com']);
  });

  it('calls a connection lost after the whole message, before the reply, ambiguous (was retried and delivered twice)', async () => {
    const dropping = await rawSmtpServer('after-dot');
    const dropped = await rejection(provider(dropping.port).send(anEmail));
    expect(dropped).toMatchObject({ permanent: false, ambiguous: true });
    expect(dropped.message).toContain('may have been delivered');
    expect(dropping.messages).toBe(1); // the server had the whole message when it hung up
  });

  it('keeps a connection lost before the message transient, and a reply to the final dot an answer', async () => {
    const early = await rawSmtpServer('at-rcpt');
    const before = await rejection(provider(early.port).send(anEmail));
    expect(before).toMatchObject({ permanent: false, ambiguous: false });
    expect(early.messages).toBe(0);
    const refusing = await rawSmtpServer('451-after-dot');
    const answered = await rejection(provider(refusing.port).send(anEmail));
    expect(answered).toMatchObject({ permanent: false, ambiguous: false });
    expect(refusing.messages).toBe(1);
  });
});

/**
 * A minimal SMTP server on 127.0.0.1 (RFC 5321 dialogue, no extensions) that misbehaves as told:
 * `at-rcpt` hangs up on RCPT; `after-dot` reads the whole message and hangs up without replying to
 * the final dot; `451-after-dot` answers it 451. `messages` counts the messages fully received.
 */
async function rawSmtpServer(mode: 'at-rcpt' | 'after-dot' | '451-after-dot') {
  const state = { port: 0, messages: 0 };
  const sockets = new Set<Socket>();
  const listener = createServer((socket) => {
    sockets.add(socket);
    socket.on('close', () => sockets.delete(socket));
    socket.on('error', () => {});
    let inData = false;
    let buffer = '';
    socket.write('220 raw.test ESMTP\r\n');
    socket.on('data', (chunk) => {
      buffer += chunk.toString('latin1');
      for (;;) {
        if (inData) {
          const end = buffer.indexOf('\r\n.\r\n');
          if (end === -1) return;
          buffer = buffer.slice(end + 5);
          inData = false;
          state.messages += 1;
          if (mode === 'after-dot') return void socket.destroy();
          socket.write(mode === '451-after-dot' ? '451 4.3.0 Try later\r\n' : '250 2.0.0 Ok: queued\r\n');
          continue;
        }
        const lineEnd = buffer.indexOf('\r\n');
        if (lineEnd === -1) return;
        const line = buffer.slice(0, lineEnd).toUpperCase();
        buffer = buffer.slice(lineEnd + 2);
        if (line.startsWith('EHLO') || line.startsWith('HELO')) socket.write('250 raw.test\r\n');
        else if (line.startsWith('RCPT') && mode === 'at-rcpt') return void socket.destroy();
        else if (line.startsWith('DATA')) {
          inData = true;
          socket.write('354 End data with <CR><LF>.<CR><LF>\r\n');
        } else if (line.startsWith('QUIT')) socket.end('221 Bye\r\n');
        else socket.write('250 Ok\r\n');
      }
    });
  });
  await new Promise<void>((resolve) => listener.listen(0, '127.0.0.1', resolve));
  state.port = (listener.address() as AddressInfo).port;
  cleanups.push(
    () =>
      new Promise<void>((resolve) => {
        for (const socket of sockets) socket.destroy();
        listener.close(() => resolve());
      }),
  );
  return state;
}
