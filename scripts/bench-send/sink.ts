/**
 * The benchmark's SMTP sink: a real smtp-server on 127.0.0.1 that reads each message's headers
 * only and counts deliveries per id (`X-Postwright-Email-Id`, or `X-Bench-Id` for raw nodemailer),
 * so the benchmark can check that every accepted email arrived exactly once.
 */
import { SMTPServer } from 'smtp-server';
import { waitUntil } from './processes.ts';

export interface Sink {
  port: number;
  /** Deliveries per id since the last reset. */
  counts: Map<string, number>;
  /** Messages received since the last reset, and when the first and last arrived (performance.now()). */
  received: () => { total: number; firstAt: number; lastAt: number };
  reset: () => void;
  close: () => Promise<void>;
}

const ID_HEADER = /^x-(?:postwright-email|bench)-id:\s*(\S+)/im;

/** Starts the sink on a random port. */
export async function startSink(): Promise<Sink> {
  let counts = new Map<string, number>();
  let total = 0;
  let firstAt = 0;
  let lastAt = 0;
  const server = new SMTPServer({
    disabledCommands: ['STARTTLS', 'AUTH'],
    logger: false,
    onData(stream, _session, callback) {
      let head = '';
      let id: string | undefined;
      stream.on('data', (chunk: Buffer) => {
        if (id !== undefined || head.length > 64_000) return;
        head += chunk.toString('utf8');
        const end = head.indexOf('\r\n\r\n');
        const match = ID_HEADER.exec(end >= 0 ? head.slice(0, end) : head);
        if (match) id = match[1]!;
        else if (end >= 0) id = '';
      });
      stream.on('end', () => {
        const now = performance.now();
        if (total === 0) firstAt = now;
        lastAt = now;
        total++;
        counts.set(id ?? '', (counts.get(id ?? '') ?? 0) + 1);
        callback(null, 'Queued');
      });
    },
  });
  server.on('error', () => {});
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const address = server.server.address();
  return {
    port: typeof address === 'object' && address ? address.port : 0,
    get counts() {
      return counts;
    },
    received: () => ({ total, firstAt, lastAt }),
    reset() {
      counts = new Map();
      total = 0;
      firstAt = 0;
      lastAt = 0;
    },
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}

/**
 * Compares what the sink received with the ids that were accepted: each exactly once, nothing else.
 * Returns a one-line verdict and whether it holds.
 */
export function exactlyOnce(sink: Sink, accepted: Iterable<string>): { ok: boolean; text: string } {
  let missing = 0;
  let duplicated = 0;
  const expected = new Set(accepted);
  for (const id of expected) {
    const n = sink.counts.get(id) ?? 0;
    if (n === 0) missing++;
    if (n > 1) duplicated++;
  }
  const unexpected = [...sink.counts.keys()].filter((id) => !expected.has(id)).length;
  const ok = missing === 0 && duplicated === 0 && unexpected === 0;
  return {
    ok,
    text: `${expected.size} accepted: ${missing} not (yet) delivered, ${duplicated} delivered more than once, ${unexpected} unknown ids`,
  };
}

/**
 * Waits until the sink holds `expected` messages, at most `seconds`, then 2 s more (late
 * duplicates would show). Returns messages per second from the first to the last, and whether all came.
 */
export async function drainSink(
  sink: Sink,
  seconds: number,
  expected: number,
): Promise<{ rate: number; complete: boolean }> {
  await waitUntil('drain', () => sink.received().total >= expected, undefined, seconds * 1000).catch(
    () => {},
  );
  await new Promise((resolve) => setTimeout(resolve, 2_000));
  const { total, firstAt, lastAt } = sink.received();
  return { rate: total > 1 ? ((total - 1) * 1000) / (lastAt - firstAt) : 0, complete: total >= expected };
}
