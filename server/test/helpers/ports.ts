import type { AddressInfo } from 'node:net';
import { createServer } from 'node:net';

/**
 * A TCP port on 127.0.0.1 that is free now: the port the system just gave a server of ours, closed
 * again. The system hands out ephemeral ports in turn, so it is not given again soon; tests use it
 * for an app whose BASE_URL must name its port before it listens, and as a port nothing listens on.
 */
export async function freePort(): Promise<number> {
  const probe = createServer();
  await new Promise<void>((resolve) => probe.listen(0, '127.0.0.1', resolve));
  const { port } = probe.address() as AddressInfo;
  await new Promise<void>((resolve) => probe.close(() => resolve()));
  return port;
}
