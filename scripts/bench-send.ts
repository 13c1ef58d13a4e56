import { readFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import pg from 'pg';
import { embeddedPhase, type Target } from './bench-send/embedded.ts';
import { formatLoad, type LoadResult, measureLoad, perSecond } from './bench-send/load.ts';
import {
  type Child,
  cpuSeconds,
  freePort,
  pidsNamed,
  postwrightEnv,
  startChild,
  startPostwright,
  waitReady,
  waitUntil,
} from './bench-send/processes.ts';
import { rawNodemailer, rawNodemailerProcess } from './bench-send/raw-nodemailer.ts';
import { setUpInstance } from './bench-send/setup.ts';
import { drainSink, exactlyOnce, type Sink, startSink } from './bench-send/sink.ts';

const HERE = path.dirname(fileURLToPath(import.meta.url));
const ROOT = path.resolve(process.env.BENCH_SERVER_ROOT ?? path.join(HERE, '..'));
const ADMIN_URL = process.env.BENCH_DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/postgres';
const SECONDS = Number(process.env.BENCH_SECONDS ?? 10);
const WARMUP = Number(process.env.BENCH_WARMUP_SECONDS ?? 3);
const DRAIN_SECONDS = Number(process.env.BENCH_DRAIN_SECONDS ?? 180);
/** When set, the worker child runs with `--cpu-prof` and writes its profile into this directory. */
const WORKER_PROFILE_DIR = process.env.BENCH_WORKER_PROFILE_DIR;
const PHASES = new Set((process.env.BENCH_PHASES ?? 'api,batch,raw,worker,nodemailer,embedded').split(','));
/** The batch phase (issue #10): emails per `POST /api/v1/send/batch` call, and connections. */
const BATCH_SIZE = 100;
const BATCH_CONNECTIONS = 10;
const BATCH_RECIPIENT = 'batch@example.test';
const CONNECTIONS = 50;
/** The queue the raw route's jobs go to: no worker takes them. */
const RAW_QUEUE = 'bench.raw';
const SETUP_TOKEN = 'bench-setup-token-0123456789';
const ENCRYPTION_KEY = Buffer.alloc(32, 9).toString('base64');
const BODY = { templateId: '', to: 'user@example.test', variables: { first_name: 'Ada' } };

const say = (line = '') => console.log(line);

async function main(): Promise<void> {
  const targets: Target[] = [];
  const children: Child[] = [];
  const cleanups: (() => Promise<void> | void)[] = [];
  const sink = await startSink();
  cleanups.push(() => sink.close());
  say(
    `Postwright send benchmark — node ${process.version}, ${CONNECTIONS} connections, ${SECONDS} s measured after ${WARMUP} s warm-up, children with LOG_LEVEL=warn NODE_ENV=${process.env.BENCH_NODE_ENV ?? 'production'}`,
  );
  say(`server checkout: ${ROOT}`);
  try {
    let api: LoadResult | undefined;
    let raw: LoadResult | undefined;
    let worker: { rate: number; count: number } | undefined;
    /** The raw baseline measured just before the worker drained (the machine's load drifts). */
    let rawBefore: Awaited<ReturnType<typeof rawProcessRate>> | undefined;
    if (['api', 'raw', 'worker'].some((p) => PHASES.has(p))) {
      const name = `postwright_bench_${Date.now()}`;
      const admin = new pg.Client({ connectionString: ADMIN_URL });
      await admin.connect();
      await admin.query(`create database ${name}`);
      await admin.end();
      cleanups.unshift(async () => {
        const drop = new pg.Client({ connectionString: ADMIN_URL });
        await drop.connect();
        await drop.query(`drop database if exists ${name} with (force)`);
        await drop.end();
      });
      const url = new URL(ADMIN_URL);
      url.pathname = `/${name}`;
      const databaseUrl = url.toString();
      const db = new pg.Pool({ connectionString: databaseUrl, max: 2 });
      cleanups.unshift(() => db.end());
      const env = (port: number) =>
        postwrightEnv({
          DATABASE_URL: databaseUrl,
          ENCRYPTION_KEY,
          SETUP_TOKEN,
          PORT: String(port),
          BASE_URL: `http://127.0.0.1:${port}`,
        });

      const port = await freePort();
      const baseUrl = `http://127.0.0.1:${port}`;
      const apiChild = startPostwright(ROOT, 'api', env(port));
      children.push(apiChild);
      await waitReady(baseUrl, apiChild);
      const instance = await setUpInstance({
        baseUrl,
        setupToken: SETUP_TOKEN,
        root: ROOT,
        smtpPort: sink.port,
        keyCount: CONNECTIONS,
      });
      say(
        `API keys: ${instance.keys.length}, one per connection, rateLimit ${instance.rateLimit.toLocaleString('en-US')}/min each${instance.rateLimit < 1_000_000 ? ' (the schema maximum on this checkout)' : ''}`,
      );
      const body = { ...BODY, templateId: instance.templateId };
      say();
      say('Accept: POST /api/v1/send on PostgreSQL');
      if (PHASES.has('api')) {
        api = await measureLoad({
          url: `${baseUrl}/api/v1/send`,
          keys: instance.keys,
          body,
          connections: CONNECTIONS,
          seconds: SECONDS,
          warmupSeconds: WARMUP,
          cpu: () => loadShares(name, apiChild),
        });
        say(formatLoad('postwright --role api', api));
      }
      if (PHASES.has('batch')) {
        // Issue #10: emails accepted per second through the batch endpoint, 100 per call, next to
        // the single-send figure above (same process, same run).
        const batch = await measureLoad({
          url: `${baseUrl}/api/v1/send/batch`,
          keys: instance.keys,
          body: { emails: Array.from({ length: BATCH_SIZE }, () => ({ ...body, to: BATCH_RECIPIENT })) },
          connections: BATCH_CONNECTIONS,
          seconds: SECONDS,
          warmupSeconds: WARMUP,
          cpu: () => loadShares(name, apiChild),
        });
        say(formatLoad(`batch calls (${BATCH_SIZE}/call, ${BATCH_CONNECTIONS} conn.)`, batch));
        say(
          `  ${'emails accepted via batch'.padEnd(30)} ${perSecond(batch.acceptedPerSecond * BATCH_SIZE).padStart(9)}${api ? `   (${((batch.acceptedPerSecond * BATCH_SIZE) / api.acceptedPerSecond).toFixed(2)}× single sends)` : ''}`,
        );
        // Not part of the worker's backlog below.
        await db.query(
          `delete from pgboss.job where name = 'email.send' and data->>'emailId' in
             (select id from email_logs where $1 = any(to_addresses))`,
          [BATCH_RECIPIENT],
        );
        await db.query('delete from email_logs where $1 = any(to_addresses)', [BATCH_RECIPIENT]);
      }
      await apiChild.stop();

      if (PHASES.has('raw')) {
        const version = await db.query<{ v: string }>(
          'select current_version_id as v from templates where id = $1',
          [instance.templateId],
        );
        const rawPort = await freePort();
        const rawChild = startChild(
          path.join(HERE, 'bench-send/raw-server.ts'),
          [],
          {
            ...process.env,
            RAW_DATABASE_URL: databaseUrl,
            RAW_QUEUE,
            RAW_PORT: String(rawPort),
            RAW_TEMPLATE_ID: instance.templateId,
            RAW_VERSION_ID: version.rows[0]!.v,
            RAW_ADAPTER_ID: instance.adapterId,
          },
          ROOT,
        );
        children.push(rawChild);
        await waitUntil('raw server', () => rawChild.output().includes('raw server ready'), rawChild);
        raw = await measureLoad({
          url: `http://127.0.0.1:${rawPort}/raw/send`,
          keys: instance.keys,
          body,
          connections: CONNECTIONS,
          seconds: SECONDS,
          warmupSeconds: WARMUP,
          cpu: () => loadShares(name, rawChild),
        });
        say(formatLoad('raw per-request route', raw));
        await rawChild.stop();
        // Its rows are not part of the worker's backlog.
        await db.query(
          `delete from email_logs where id in (select data->>'emailId' from pgboss.job where name = $1)`,
          [RAW_QUEUE],
        );
        await db.query('delete from pgboss.job where name = $1', [RAW_QUEUE]);
      }
      if (api && raw)
        say(
          `  ratio                          ${(api.acceptedPerSecond / raw.acceptedPerSecond).toFixed(2)}×`,
        );

      if (PHASES.has('worker')) {
        const queued = await db.query<{ id: string }>(`select id from email_logs where status = 'queued'`);
        const expected = queued.rows.map((r) => r.id);
        if (PHASES.has('nodemailer')) rawBefore = await rawProcessRate(sink, rawCount(expected.length));
        sink.reset();
        const profile = WORKER_PROFILE_DIR ? ['--cpu-prof', '--cpu-prof-dir', WORKER_PROFILE_DIR] : [];
        const workerChild = startPostwright(ROOT, 'worker', env(await freePort()), profile);
        children.push(workerChild);
        // From the first delivery on (the worker's start-up is not part of the rate either).
        await waitUntil('first delivery', () => sink.received().total > 0, workerChild);
        const cpuBefore = cpuShares(name, workerChild);
        const deliveredBefore = sink.received().total;
        const result = await drainSink(sink, DRAIN_SECONDS, expected.length);
        const cpuAfter = cpuShares(name, workerChild);
        const deliveredDuring = sink.received().total - deliveredBefore;
        await workerChild.stop();
        worker = { rate: result.rate, count: expected.length };
        const check = exactlyOnce(sink, expected);
        say();
        say(`Delivery: ${expected.length} queued emails → SMTP sink`);
        say(
          `  ${'postwright --role worker'.padEnd(30)} ${perSecond(result.rate).padStart(9)}${result.complete ? '' : `   (NOT drained within ${DRAIN_SECONDS} s)`}`,
        );
        say(`  exactly once: ${check.ok ? 'yes' : 'NO'} — ${check.text}`);
        const used = (key: keyof typeof cpuAfter) => {
          const seconds = cpuAfter[key] - cpuBefore[key];
          return `${seconds.toFixed(1)} s (${Math.round((seconds * 1e6) / Math.max(1, deliveredDuring))} µs/email)`;
        };
        say(
          `  CPU during the drain: worker ${used('server')}, its PostgreSQL backends ${used('postgres')}, benchmark process with the sink ${used('bench')}`,
        );
        targets.push({
          name: 'PostgreSQL: each accepted email delivered exactly once',
          ok: check.ok,
          value: check.text,
        });
      }
    }

    if (PHASES.has('nodemailer')) {
      const count = rawCount(worker?.count ?? 5_000);
      // Own process, as the worker runs: measured before and after the worker's drain, the mean is
      // the baseline (a shared machine's load drifts between phases).
      const runs = [...(rawBefore ? [rawBefore] : []), await rawProcessRate(sink, count)];
      const rate = runs.reduce((sum, run) => sum + run.rate, 0) / runs.length;
      say(
        `  ${'raw nodemailer pool (5 conn.)'.padEnd(30)} ${perSecond(rate).padStart(9)}   (${count} messages, its own process as the worker; ${runs.map((run) => perSecond(run.rate)).join(' before, ')} after the drain${runs.map((run) => run.check).join('')})`,
      );
      // Next to the worker's CPU per email: how much of the gap is CPU the worker spends that the
      // raw loop does not (rendering, PostgreSQL round trips, recording).
      say(
        `    its CPU per message: ${runs.map((run) => `${Math.round(run.cpuMicros)} µs`).join(' before, ')} after the drain`,
      );
      sink.reset();
      const inProcess = await rawNodemailer(ROOT, sink.port, count);
      const inProcessCheck = exactlyOnce(sink, inProcess.ids);
      const inProcessRate = sinkRate(sink);
      say(
        `  ${'  same, inside the sink’s process'.padEnd(30)} ${perSecond(inProcessRate).padStart(9)}   (no cross-process wake-ups${inProcessCheck.ok ? '' : `; sink: ${inProcessCheck.text}`})`,
      );
      if (worker) {
        say(
          `  ratio                          ${(worker.rate / rate).toFixed(2)}× (${(worker.rate / inProcessRate).toFixed(2)}× the in-process figure)`,
        );
        targets.push({
          name: 'delivery ≥ 0.8× raw nodemailer (own process)',
          ok: worker.rate >= 0.8 * rate,
          value: `${(worker.rate / rate).toFixed(2)}×`,
        });
      }
    }

    if (PHASES.has('embedded')) {
      const found = await embeddedPhase({
        root: ROOT,
        sink,
        setupToken: SETUP_TOKEN,
        load: { connections: CONNECTIONS, seconds: SECONDS, warmupSeconds: WARMUP },
        body: BODY,
        drainSeconds: DRAIN_SECONDS,
        say,
        children,
        cleanups,
      });
      targets.push(...found);
    }

    if (api) {
      targets.unshift(
        {
          name: 'accept ≥ 2,000/s',
          ok: api.acceptedPerSecond >= 2_000,
          value: perSecond(api.acceptedPerSecond),
        },
        { name: 'accept p99 ≤ 50 ms', ok: api.p99 <= 50, value: `${api.p99} ms` },
      );
      if (raw) {
        const ratio = api.acceptedPerSecond / raw.acceptedPerSecond;
        targets.splice(2, 0, {
          name: 'accept ≥ 2× raw per-request route',
          ok: ratio >= 2,
          value: `${ratio.toFixed(2)}×`,
        });
      }
    }
    say();
    say('Targets');
    for (const t of targets) say(`  ${(t.ok ? 'PASS' : 'FAIL').padEnd(5)} ${t.name.padEnd(56)} ${t.value}`);
  } finally {
    await Promise.all(children.map((child) => child.stop()));
    for (const cleanup of cleanups)
      await Promise.resolve(cleanup()).catch((error: unknown) => console.error('cleanup:', error));
  }
}

/** Messages the raw baseline sends for a backlog of `queued`: as many, within 1,000–20,000. */
function rawCount(queued: number): number {
  return Math.min(Math.max(queued, 1_000), 20_000);
}

/** Messages per second the sink received since its last reset, from the first to the last. */
function sinkRate(sink: Sink): number {
  const { total, firstAt, lastAt } = sink.received();
  return total > 1 ? ((total - 1) * 1000) / (lastAt - firstAt) : 0;
}

/** {@link cpuShares} named for an accept phase's CPU line: the server, its PostgreSQL, the load generator. */
function loadShares(database: string, server: Child): Record<string, number> {
  const shares = cpuShares(database, server);
  return { server: shares.server, PostgreSQL: shares.postgres, 'load generator': shares.bench };
}

/**
 * Raw pooled nodemailer in its own process sending `count` messages to the sink, measured at the
 * sink as the worker is; returns its rate and the sink's exactly-once verdict.
 */
async function rawProcessRate(
  sink: Sink,
  count: number,
): Promise<{ rate: number; check: string; cpuMicros: number }> {
  sink.reset();
  const { ids, cpuMicrosPerMessage } = await rawNodemailerProcess(ROOT, sink.port, count);
  const check = exactlyOnce(sink, ids);
  return {
    rate: sinkRate(sink),
    check: check.ok ? '' : `; sink: ${check.text}`,
    cpuMicros: cpuMicrosPerMessage,
  };
}

/**
 * CPU seconds used so far by the server child (api, worker or the raw route), the PostgreSQL backends connected to the benchmark's
 * database `database` (their command line names it), and this process (which runs the sink and the load generator).
 */
function cpuShares(database: string, server: Child): { server: number; postgres: number; bench: number } {
  const backends = pidsNamed('postgres').filter((pid) => {
    try {
      return readFileSync(`/proc/${pid}/cmdline`, 'utf8').includes(` ${database} `);
    } catch {
      return false;
    }
  });
  return {
    server: cpuSeconds(server.process.pid ?? 0),
    postgres: backends.reduce((sum, pid) => sum + cpuSeconds(pid), 0),
    bench: cpuSeconds(process.pid),
  };
}

main().then(
  () => process.exit(0),
  (error: unknown) => {
    console.error(error);
    process.exit(1);
  },
);
