/**
 * HTTP load for the send benchmark: autocannon at a fixed number of connections for a fixed time,
 * each connection with its own API key (so a per-key rate limit is not what is measured).
 */
import autocannon from 'autocannon';

/** What one measured run gives: accepted (2xx) sends per second and latency percentiles (ms). */
export interface LoadResult {
  accepted: number;
  /**
   * CPU seconds used during the measured run, per share (`cpu` option's keys, e.g. the server, its
   * PostgreSQL backends, the load generator's process); absent without the option.
   */
  cpuSeconds?: Record<string, number>;
  acceptedPerSecond: number;
  p50: number;
  p99: number;
  refused: Record<string, number>;
  errors: number;
}

/**
 * POSTs `body` to `url` from `connections` connections for `seconds` (after `warmupSeconds` of the
 * same load, not counted), connection i sending `x-api-key: keys[i % keys.length]`.
 */
export async function measureLoad(options: {
  url: string;
  keys: string[];
  body: object;
  connections: number;
  seconds: number;
  warmupSeconds: number;
  /** Reads cumulative CPU seconds per share; read just before and after the measured run. */
  cpu?: () => Record<string, number>;
}): Promise<LoadResult & { warmupAccepted: number }> {
  const run = async (duration: number) => {
    let next = 0;
    return autocannon({
      url: options.url,
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify(options.body),
      connections: options.connections,
      duration,
      timeout: 30,
      setupClient: (client) => {
        client.setHeaders({
          'content-type': 'application/json',
          'x-api-key': options.keys[next++ % options.keys.length]!,
        });
      },
    });
  };
  const warmup = options.warmupSeconds > 0 ? await run(options.warmupSeconds) : undefined;
  const cpuBefore = options.cpu?.();
  const result = await run(options.seconds);
  const cpuAfter = options.cpu?.();
  const refused = Object.fromEntries(
    Object.entries(result.statusCodeStats)
      .filter(([code]) => !code.startsWith('2'))
      .map(([code, stats]) => [code, stats.count]),
  );
  return {
    accepted: result['2xx'],
    acceptedPerSecond: result['2xx'] / result.duration,
    p50: result.latency.p50,
    p99: result.latency.p99,
    refused,
    errors: result.errors,
    warmupAccepted: warmup?.['2xx'] ?? 0,
    ...(cpuBefore && cpuAfter
      ? {
          cpuSeconds: Object.fromEntries(
            Object.entries(cpuAfter).map(([share, seconds]) => [share, seconds - (cpuBefore[share] ?? 0)]),
          ),
        }
      : {}),
  };
}

/** `1,234/s`. */
export const perSecond = (n: number) => `${Math.round(n).toLocaleString('en-US')}/s`;

/** One report line for a load result. */
export function formatLoad(name: string, r: LoadResult): string {
  const refused = Object.keys(r.refused).length ? `, refused ${JSON.stringify(r.refused)}` : '';
  const errors = r.errors ? `, ${r.errors} errors` : '';
  const cpu = r.cpuSeconds
    ? `\n    CPU per accepted request: ${Object.entries(r.cpuSeconds)
        .map(([share, seconds]) => `${share} ${Math.round((seconds * 1e6) / Math.max(1, r.accepted))} µs`)
        .join(', ')}`
    : '';
  return (
    `  ${name.padEnd(30)} ${perSecond(r.acceptedPerSecond).padStart(9)}   p50 ${r.p50} ms   p99 ${r.p99} ms` +
    `   (${r.accepted} accepted${refused}${errors})${cpu}`
  );
}
