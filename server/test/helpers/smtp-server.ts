import { type ParsedMail, simpleParser } from 'mailparser';
import { SMTPServer, type SMTPServerOptions } from 'smtp-server';
import { vi } from 'vitest';
import { freePort } from './ports.ts';

/** A message the test SMTP server accepted: the envelope and the parsed MIME message. */
export interface ReceivedMessage {
  envelopeFrom: string;
  envelopeTo: string[];
  parsed: ParsedMail;
  raw: string;
}

export interface TestSmtpServer {
  port: number;
  messages: ReceivedMessage[];
  /** Resolves once at least `count` messages arrived (fails after `timeoutMs`). */
  waitForMessages(count: number, timeoutMs?: number): Promise<ReceivedMessage[]>;
  close(): Promise<void>;
}

/**
 * A real SMTP server (smtp-server) on 127.0.0.1 and a random port that parses every message with
 * mailparser. `options` may override behaviour (onRcptTo to refuse, onAuth to demand credentials);
 * `reply` gives the text of the final 250 reply to the n-th message (default `Queued as test-<n>`).
 */
export async function startTestSmtpServer(
  options: Partial<SMTPServerOptions> = {},
  reply: (count: number) => string = (count) => `Queued as test-${count}`,
): Promise<TestSmtpServer> {
  const messages: ReceivedMessage[] = [];
  const server = new SMTPServer({
    disabledCommands: ['STARTTLS', 'AUTH'],
    logger: false,
    ...options,
    onData(stream, session, callback) {
      const chunks: Buffer[] = [];
      stream.on('data', (chunk: Buffer) => chunks.push(chunk));
      stream.on('end', async () => {
        const raw = Buffer.concat(chunks).toString('utf8');
        const parsed = await simpleParser(raw);
        messages.push({
          envelopeFrom: session.envelope.mailFrom ? session.envelope.mailFrom.address : '',
          envelopeTo: session.envelope.rcptTo.map((r) => r.address),
          parsed,
          raw,
        });
        callback(null, reply(messages.length));
      });
    },
  });
  // Without a listener a failed handshake would kill the test process (ARCHITECTURE.md traps).
  server.on('error', () => {});
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const address = server.server.address();
  const port = typeof address === 'object' && address ? address.port : 0;
  return {
    port,
    messages,
    waitForMessages(count, timeoutMs = 20_000) {
      return vi.waitFor(
        () => {
          if (messages.length < count) throw new Error(`expected ${count} messages, got ${messages.length}`);
          return messages;
        },
        { timeout: timeoutMs, interval: 50 },
      );
    },
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}

/**
 * A TCP port on 127.0.0.1 that nothing listens on (issue #9: a hard-coded port such as 2525 may be
 * in use on the machine): see {@link freePort}.
 */
export const closedPort = freePort;
