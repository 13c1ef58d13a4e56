import { type AddressInfo, createServer, type Server } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { rejectionOf } from '../../test/helpers/rejection.ts';
import { closedPort } from '../../test/helpers/smtp-server.ts';
import { connectOutbound } from './outbound-connect.ts';
import { OutboundRefusedError } from './outbound-lookup.ts';

describe('connectOutbound', () => {
  let server: Server;
  let port: number;
  const peers: string[] = [];

  beforeAll(async () => {
    server = createServer((socket) => {
      peers.push(socket.remoteAddress ?? '');
      socket.end();
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    port = (server.address() as AddressInfo).port;
  });
  afterAll(() => new Promise<void>((resolve) => server.close(() => resolve())));

  it('refuses a loopback destination, by literal and by name, without opening a connection', async () => {
    const before = peers.length;
    for (const host of ['127.0.0.1', 'localhost']) {
      const error = await rejectionOf(
        connectOutbound(host, port, { allowPrivate: false }, { timeoutMs: 5_000 }),
      );
      expect(error).toBeInstanceOf(OutboundRefusedError);
      expect(error?.message).toContain('SMTP_ALLOW_PRIVATE');
    }
    await new Promise((resolve) => setTimeout(resolve, 50));
    expect(peers.length).toBe(before);
  });

  it('connects to the checked address when the policy allows it', async () => {
    const socket = await connectOutbound('localhost', port, { allowPrivate: true }, { timeoutMs: 5_000 });
    expect(['127.0.0.1', '::ffff:127.0.0.1']).toContain(socket.remoteAddress);
    expect(socket.listenerCount('error')).toBe(0);
    socket.destroy();
  });

  it("passes the socket's own error through for a closed port", async () => {
    const error = await rejectionOf(
      connectOutbound('127.0.0.1', await closedPort(), { allowPrivate: true }, { timeoutMs: 5_000 }),
    );
    expect(error?.code).toBe('ECONNREFUSED');
  });

  it('fails with ETIMEDOUT, without connecting, when the budget is already spent', async () => {
    const before = peers.length;
    const error = await rejectionOf(
      connectOutbound(
        '127.0.0.1',
        port,
        { allowPrivate: true },
        { timeoutMs: 1_000, startedAt: Date.now() - 2_000 },
      ),
    );
    expect(error?.code).toBe('ETIMEDOUT');
    await new Promise((resolve) => setTimeout(resolve, 50));
    expect(peers.length).toBe(before);
  });
});
