import { createServer, type IncomingHttpHeaders, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { Webhook } from 'standardwebhooks';

/** One request the receiver got. */
export interface ReceivedWebhook {
  path: string;
  headers: IncomingHttpHeaders;
  body: string;
  json: any;
  receivedAt: number;
}

/** What the receiver answers a request with (default 200 "ok"). */
export interface ReceiverAnswer {
  status?: number;
  body?: string;
  /** Wait this long before answering (ms). */
  delayMs?: number;
}

export interface WebhookReceiver {
  url(path: string): string;
  requests: ReceivedWebhook[];
  /** Requests to `path`, in arrival order. */
  to(path: string): ReceivedWebhook[];
  /** Sets how requests to `path` are answered; `answer` gets the request's 1-based count on that path. */
  answer(path: string, answer: (nth: number, request: ReceivedWebhook) => ReceiverAnswer): void;
  close(): Promise<void>;
}

/**
 * A real HTTP receiver on 127.0.0.1 for webhook tests: records every request with its headers and
 * raw body, and answers per path as told.
 */
export async function startWebhookReceiver(): Promise<WebhookReceiver> {
  const requests: ReceivedWebhook[] = [];
  const answers = new Map<string, (nth: number, request: ReceivedWebhook) => ReceiverAnswer>();
  const server: Server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (chunk: Buffer) => chunks.push(chunk));
    req.on('end', () => {
      const body = Buffer.concat(chunks).toString('utf8');
      const path = req.url ?? '/';
      let json: unknown;
      try {
        json = JSON.parse(body);
      } catch {
        json = undefined;
      }
      const received: ReceivedWebhook = { path, headers: req.headers, body, json, receivedAt: Date.now() };
      requests.push(received);
      const nth = requests.filter((r) => r.path === path).length;
      const answer = answers.get(path)?.(nth, received) ?? {};
      const reply = () => {
        if (res.destroyed) return;
        res.writeHead(answer.status ?? 200, { 'content-type': 'text/plain' });
        res.end(answer.body ?? 'ok');
      };
      if (answer.delayMs) setTimeout(reply, answer.delayMs);
      else reply();
    });
  });
  server.keepAliveTimeout = 1000;
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: (path) => `http://127.0.0.1:${port}${path}`,
    requests,
    to: (path) => requests.filter((r) => r.path === path),
    answer: (path, answer) => answers.set(path, answer),
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

/**
 * Verifies a received request with the `standardwebhooks` package (Standard Webhooks reference
 * implementation): throws WebhookVerificationError when no signature matches `secret`.
 * @returns the parsed payload.
 */
export function verifyWebhook(secret: string, request: ReceivedWebhook): unknown {
  return new Webhook(secret).verify(request.body, {
    'webhook-id': String(request.headers['webhook-id']),
    'webhook-timestamp': String(request.headers['webhook-timestamp']),
    'webhook-signature': String(request.headers['webhook-signature']),
  });
}
