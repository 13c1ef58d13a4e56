/**
 * The webhook receiver of `npm run bench:webhooks`, in its own process (so the process measured
 * does not also serve the requests): answers every POST with 200 at once, notes when each email's
 * first event arrived (Date.now(), ms), and reports over IPC: `{type: 'count'}` → its request
 * count; `{type: 'reach', n}` → true once the count reaches `n` (told by the receiver when it
 * happens, so the benchmark does not poll it while the worker runs); `{type: 'arrivals'}` →
 * [emailId, ms][]; `{type: 'reset'}` clears both.
 */
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';

const arrivals = new Map<string, number>();
let count = 0;
/** A pending `reach` request: the count it waits for and the message id to answer. */
let reach: { n: number; id: number } | undefined;
let sample: { body: string; headers: Record<string, string> } | undefined;
const server = createServer((req, res) => {
  const chunks: Buffer[] = [];
  req.on('data', (c: Buffer) => chunks.push(c));
  req.on('end', () => {
    count++;
    if (reach && count >= reach.n) {
      process.send?.({ id: reach.id, value: true });
      reach = undefined;
    }
    const body = Buffer.concat(chunks).toString('utf8');
    const emailId = /"emailId":"([^"]+)"/.exec(body)?.[1];
    if (emailId && !arrivals.has(emailId)) arrivals.set(emailId, Date.now());
    sample ??= {
      body,
      headers: {
        'webhook-id': String(req.headers['webhook-id']),
        'webhook-timestamp': String(req.headers['webhook-timestamp']),
        'webhook-signature': String(req.headers['webhook-signature']),
      },
    };
    res.writeHead(200, { 'content-type': 'text/plain' });
    res.end('ok');
  });
});
server.keepAliveTimeout = 10_000;
server.listen(0, '127.0.0.1', () => {
  process.send?.({ type: 'listening', port: (server.address() as AddressInfo).port });
});
process.on('message', (message: { type: string; id: number; n?: number }) => {
  const reply = (value: unknown) => process.send?.({ id: message.id, value });
  if (message.type === 'count') reply(count);
  else if (message.type === 'reach') {
    if (count >= message.n!) reply(true);
    else reach = { n: message.n!, id: message.id };
  } else if (message.type === 'arrivals') reply([...arrivals]);
  else if (message.type === 'sample') reply(sample);
  else if (message.type === 'reset') {
    count = 0;
    arrivals.clear();
    sample = undefined;
    reply(true);
  }
});
process.on('disconnect', () => process.exit(0));
