import type { AddressInfo } from 'node:net';
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
});
