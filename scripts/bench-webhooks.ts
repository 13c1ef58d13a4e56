/**
 * `npm run bench:webhooks` (issue #11): webhook deliveries per second from the batched worker to a
 * local receiver, next to a raw undici POST loop sending the same payloads with the same signatures
 * in the same run (target ≥ 0.5× raw), and the delay from a committed status change to its
 * delivery at the receiver (p50 / p99). Both sides are warmed up first, unmeasured: BENCH_WARMUP
 * raw POSTs and as many deliveries by the worker (JIT-compiled code, connections, the job table's
 * statistics), so the ratio compares steady states — with a cold first raw pass in its mean
 * the raw baseline read 20-60 % lower than its second pass.
 *
 * In one process, on a database it creates and drops on BENCH_DATABASE_URL (default: this machine's
 * PostgreSQL): real email logs moved `queued → sent` with the status writer (`transitionMany`),
 * whose outbox writes the deliveries' `webhook_outbox` rows; the worker is the app's
 * (`startWorkers`: the webhook dispatcher, WORKER_CONCURRENCY and per-webhook cap as configured). The raw loop keeps as many
 * requests in flight as the worker's per-webhook cap allows (100 with the defaults). The worker
 * drains BENCH_ROUNDS backlogs (default 3), with a raw pass before, between and after them; each
 * drain's ratio is to the mean of the raw passes around it, and the figure is the median of those
 * ratios (a shared machine's load drifts within a run, and a 5,000-delivery drain lasts about a
 * second and a half: single runs of the same tree ranged 0.42-0.80× within an hour). Every
 * drain's rate, raw pass and ratio is printed.
 * Also printed: CPU time per delivery of the worker's run (this process, i.e. the worker; the
 * PostgreSQL backends of the benchmark's database, from /proc, with the queue's own connections
 * apart; the kernel's share of this process's) next to this process's CPU per raw POST, the
 * receiver's CPU per request in both, and the load average — on a shared machine the rates drift,
 * CPU per delivery much less.
 * Settings: BENCH_WEBHOOKS (deliveries per throughput run, default 5000), BENCH_LATENCY_RATE
 * (status changes per second in the latency run, default 100), BENCH_LATENCY_SECONDS (default 10),
 * BENCH_CPU_PROFILE (a file: a V8 CPU profile of this process during the worker's drains, sampled
 * every 250 µs; `file.1`, `file.2`, … with several rounds), BENCH_STATEMENTS=1 (the statements the worker's run sent, counted by text, fetches
 * by size), BENCH_PG_STATS=1 (the benchmark's database logs each statement's PostgreSQL CPU,
 * log_statement_stats, to the server log, and the worker run's window is printed: per-statement
 * parse / bind / execute costs); the process's environment sets Postwright's own variables
 * (WORKER_CONCURRENCY, …).
 */

import { fork } from 'node:child_process';
import { createSecretKey, randomBytes } from 'node:crypto';
import { readFileSync, writeFileSync } from 'node:fs';
import { Session } from 'node:inspector/promises';
import { loadavg } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import pg from 'pg';
import { Webhook } from 'standardwebhooks';
import { Agent, request } from 'undici';
import { loadConfig } from '../server/src/config.ts';
import { createContext } from '../server/src/context.ts';
import { migrateDatabase, openDatabase } from '../server/src/db/client.ts';
import { emailLogs, teams } from '../server/src/db/schema/index.ts';
import { newId } from '../server/src/ids.ts';
import { bindJobHandlers } from '../server/src/job-handlers.ts';
import { JobQueue } from '../server/src/jobs/queue.ts';
import { declareQueues, startWorkers } from '../server/src/jobs/registry.ts';
import { transitionMany } from '../server/src/modules/emails/emails.status.service.ts';
import { webhookDeliveriesInFlight } from '../server/src/modules/webhooks/webhook-dispatcher.ts';
import { eventPayload } from '../server/src/modules/webhooks/webhook-events.ts';
import { signatureHeader, signingKey } from '../server/src/modules/webhooks/webhook-signature.ts';
import { createWebhook } from '../server/src/modules/webhooks/webhooks.service.ts';
import { cpuSeconds, pidsNamed } from './bench-send/processes.ts';

const ADMIN_URL = process.env.BENCH_DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/postgres';
const DELIVERIES = Number(process.env.BENCH_WEBHOOKS ?? 5000);
const WARMUP = Number(process.env.BENCH_WARMUP ?? 1000);
const ROUNDS = Math.max(1, Number(process.env.BENCH_ROUNDS ?? 3));
const LATENCY_RATE = Number(process.env.BENCH_LATENCY_RATE ?? 100);
const LATENCY_SECONDS = Number(process.env.BENCH_LATENCY_SECONDS ?? 10);
const CPU_PROFILE = process.env.BENCH_CPU_PROFILE;
const ENCRYPTION_KEY = Buffer.alloc(32, 9);
const HERE = path.dirname(fileURLToPath(import.meta.url));
const say = (line = '') => console.log(line);

/** The receiver, in a child process (scripts/bench-webhooks/receiver.ts), driven over IPC. */
async function startReceiver() {
  const child = fork(path.join(HERE, 'bench-webhooks', 'receiver.ts'), [], { stdio: 'inherit' });
  const port = await new Promise<number>((resolve, reject) => {
    child.once('error', reject);
    child.on('message', (message: { type?: string; port?: number }) => {
      if (message.type === 'listening') resolve(message.port!);
    });
  });
  let nextId = 0;
  const ask = <T>(type: string, n?: number): Promise<T> =>
    new Promise((resolve) => {
      const id = ++nextId;
      const onMessage = (message: { id?: number; value?: T }) => {
        if (message.id !== id) return;
        child.off('message', onMessage);
        resolve(message.value as T);
      };
      child.on('message', onMessage);
      child.send({ type, id, n });
    });
  return {
    /** CPU seconds the receiver process used so far (/proc, 10 ms ticks). */
    cpu: () => cpuSeconds(child.pid!),
    url: `http://127.0.0.1:${port}/hook`,
    count: () => ask<number>('count'),
    /** Resolves once the receiver has counted `n` requests since its last reset. */
    reach: (n: number) => ask<boolean>('reach', n),
    arrivals: async () => new Map(await ask<[string, number][]>('arrivals')),
    sample: () => ask<{ body: string; headers: Record<string, string> } | undefined>('sample'),
    reset: () => ask<boolean>('reset'),
    close: () => {
      child.kill();
    },
  };
}

async function waitUntil(check: () => Promise<boolean>, timeoutMs: number, what: string): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 5));
  }
}

/** CPU seconds used so far by each PostgreSQL backend connected to `database` (Linux /proc), by pid. */
function postgresCpu(database: string): Map<number, number> {
  const byPid = new Map<number, number>();
  for (const pid of pidsNamed('postgres')) {
    try {
      if (readFileSync(`/proc/${pid}/cmdline`, 'utf8').includes(` ${database} `))
        byPid.set(pid, cpuSeconds(pid));
    } catch {
      // the backend exited meanwhile
    }
  }
  return byPid;
}

/** CPU seconds each backend used between two {@link postgresCpu} readings (a new backend from 0). */
function postgresCpuBetween(before: Map<number, number>, after: Map<number, number>): Map<number, number> {
  return new Map([...after].map(([pid, seconds]) => [pid, seconds - (before.get(pid) ?? 0)]));
}

function median(values: number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  const middle = Math.floor(sorted.length / 2);
  return sorted.length % 2 ? sorted[middle]! : (sorted[middle - 1]! + sorted[middle]!) / 2;
}

function percentile(sorted: number[], p: number): number {
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))] ?? Number.NaN;
}

async function main(): Promise<void> {
  const name = `postwright_bench_webhooks_${Date.now()}`;
  const admin = new pg.Client({ connectionString: ADMIN_URL });
  await admin.connect();
  await admin.query(`create database ${name}`);
  if (process.env.BENCH_PG_STATS) {
    await admin.query(`alter database ${name} set log_statement_stats = on`);
    await admin.query(`alter database ${name} set log_min_error_statement = log`);
    console.log('PGSTATS_START', new Date().toISOString());
  }
  await admin.end();
  const url = new URL(ADMIN_URL);
  url.pathname = `/${name}`;
  const config = loadConfig({
    ...process.env,
    DATABASE_URL: url.toString(),
    ENCRYPTION_KEY: ENCRYPTION_KEY.toString('base64'),
    WEBHOOKS_ALLOW_PRIVATE: 'true',
    LOG_LEVEL: 'warn',
  });
  const database = await openDatabase({ databaseUrl: url.toString() });
  const queue = new JobQueue(database);
  const receiver = await startReceiver();
  const { db } = database;
  try {
    await migrateDatabase(database);
    await queue.start();
    await declareQueues(queue, config);
    const context = await createContext({ config, database, queue, encryptionKey: ENCRYPTION_KEY });
    const handlers = bindJobHandlers(context);
    const teamId = newId('team');
    await db
      .insert(teams)
      .values({ id: teamId, name: 'Bench', slug: `bench-${randomBytes(4).toString('hex')}` });
    const hook = await createWebhook({ db, config, encryptionKey: ENCRYPTION_KEY }, teamId, {
      name: 'bench',
      url: receiver.url,
      events: ['email.sent'],
    });
    const inFlight = webhookDeliveriesInFlight(config);
    say(
      `Postwright webhook benchmark — node ${process.version}, ${DELIVERIES} deliveries per throughput run after ${WARMUP} unmeasured of each, ` +
        `worker: WORKER_CONCURRENCY=${config.WORKER_CONCURRENCY}, ${inFlight} per webhook in flight; raw loop: ${inFlight} in flight`,
    );

    /** Inserts `n` queued email logs of the team; returns their ids. */
    const insertLogs = async (n: number): Promise<string[]> => {
      const ids: string[] = [];
      for (let start = 0; start < n; start += 1000) {
        const rows = Array.from({ length: Math.min(1000, n - start) }, (_, i) => ({
          id: newId('emailLog'),
          teamId,
          templateId: null,
          templateName: 'Bench',
          templateVersionId: 'ver_bench',
          adapterId: 'adp_bench',
          apiKeyId: null,
          toAddresses: [`user${start + i}@example.test`],
          fromAddress: 'bench@example.test',
          subject: `Hello ${start + i}`,
          variables: { first_name: 'Ada' },
          status: 'queued' as const,
          jobId: 'job_bench',
        }));
        await db.insert(emailLogs).values(rows);
        ids.push(...rows.map((row) => row.id));
      }
      return ids;
    };
    const moveToSent = (ids: string[]) =>
      db.transaction((tx) =>
        transitionMany(
          tx,
          ids.map((id) => ({ email: { id, teamId }, event: { status: 'sent' as const } })),
        ),
      );

    // 1. Raw baseline: the same bodies and signatures, POSTed by a plain undici loop.
    const rawIds = await insertLogs(DELIVERIES);
    const key = createSecretKey(signingKey(hook.secret));
    const agent = new Agent({ connections: 64 });
    const bodies = rawIds.map((id, i) =>
      JSON.stringify(
        eventPayload(
          {
            id,
            teamId,
            templateId: null,
            toAddresses: [`user${i}@example.test`],
            subject: `Hello ${i}`,
            status: 'sent',
          },
          new Date(),
        ),
      ),
    );
    /** One raw pass over `list` (default: every body): deliveries per second. */
    let rawCpuMicros = 0;
    let rawSystemMicros = 0;
    let rawReceiverSeconds = 0;
    const rawPass = async (list: string[] = bodies, measured = true): Promise<number> => {
      await receiver.reset();
      const cpuBefore = process.cpuUsage();
      const receiverBefore = receiver.cpu();
      let next = 0;
      const rawStarted = performance.now();
      await Promise.all(
        Array.from({ length: inFlight }, async () => {
          while (next < list.length) {
            const body = list[next++]!;
            const messageId = newId('webhookMessage');
            const timestamp = Math.floor(Date.now() / 1000);
            const response = await request(receiver.url, {
              method: 'POST',
              dispatcher: agent,
              headers: {
                'content-type': 'application/json',
                'webhook-id': messageId,
                'webhook-timestamp': String(timestamp),
                'webhook-signature': signatureHeader([key], messageId, timestamp, body),
              },
              body,
            });
            await response.body.text();
          }
        }),
      );
      const cpu = process.cpuUsage(cpuBefore);
      if (measured) {
        rawCpuMicros += cpu.user + cpu.system;
        rawSystemMicros += cpu.system;
        rawReceiverSeconds += receiver.cpu() - receiverBefore;
      }
      return list.length / ((performance.now() - rawStarted) / 1000);
    };
    // Warm-up first, unmeasured: the raw loop, then the worker draining a small backlog.
    await startWorkers(queue, config, handlers);
    if (WARMUP > 0) {
      await rawPass(bodies.slice(0, WARMUP), false);
      const warmupIds = await insertLogs(WARMUP);
      await receiver.reset();
      await moveToSent(warmupIds);
      await receiver.reach(WARMUP);
    }
    // Raw passes alternate with the worker's runs (the machine's load drifts): each run's baseline
    // is the mean of the raw passes just before and just after it.
    const rawRates = [await rawPass()];
    const workerRates: number[] = [];
    const ratios: number[] = [];
    let nodeCpuMicros = 0;
    let nodeSystemMicros = 0;
    let receiverSeconds = 0;
    let postgresCpuSeconds = 0;
    let queuePostgresSeconds = 0;
    let verified = false;
    const statementCounts = new Map<string, number>();
    const clientProto = pg.Client.prototype as unknown as { query: (...args: unknown[]) => unknown };
    const originalQuery = clientProto.query;
    if (process.env.BENCH_STATEMENTS) {
      clientProto.query = function (this: unknown, ...args: unknown[]) {
        const first = args[0] as string | { text?: string };
        const text = (typeof first === 'string' ? first : (first?.text ?? ''))
          .replace(/\s+/g, ' ')
          .replace(/^.*active_group_count_map.*(LIMIT \d+).*$/, 'fetch $1')
          .slice(0, 70);
        statementCounts.set(text, (statementCounts.get(text) ?? 0) + 1);
        return originalQuery.apply(this, args);
      };
    }
    const profiler = CPU_PROFILE ? new Session() : undefined;
    if (profiler) {
      profiler.connect();
      await profiler.post('Profiler.enable');
      await profiler.post('Profiler.setSamplingInterval', { interval: 250 });
    }
    for (let round = 0; round < ROUNDS; round++) {
      // 2. The worker: a backlog of DELIVERIES status changes (one transaction), then drained.
      const ids = await insertLogs(DELIVERIES);
      await receiver.reset();
      await moveToSent(ids);
      if (profiler) await profiler.post('Profiler.start');

      // /proc is read before this process's CPU count starts and after it ends (a scan of every
      // process's cmdline costs ~25 ms of this process's CPU, not the worker's).
      const postgresCpuBefore = postgresCpu(name);
      const nodeCpuBefore = process.cpuUsage();
      const receiverCpuBefore = receiver.cpu();
      const workerStarted = performance.now();
      await Promise.race([
        receiver.reach(DELIVERIES),
        new Promise((_, reject) =>
          setTimeout(
            () => reject(new Error('timed out waiting for the backlog to be delivered')),
            300_000,
          ).unref(),
        ),
      ]);
      const workerSeconds = (performance.now() - workerStarted) / 1000;
      const nodeCpu = process.cpuUsage(nodeCpuBefore);
      nodeCpuMicros += nodeCpu.user + nodeCpu.system;
      nodeSystemMicros += nodeCpu.system;
      receiverSeconds += receiver.cpu() - receiverCpuBefore;
      const postgresCpuByPid = postgresCpuBetween(postgresCpuBefore, postgresCpu(name));
      postgresCpuSeconds += [...postgresCpuByPid.values()].reduce((sum, s) => sum + s, 0);
      // Which of those backends are the queue's (pg-boss: the other queues' polls, its
      // maintenance) and which the app's pool (the outbox claims, the webhooks' rows, the records).
      const { rows: backends } = await database.pool.query<{ pid: number; application_name: string }>(
        'select pid, application_name from pg_stat_activity where datname = current_database()',
      );
      const queueBackends = new Set(
        backends.filter((b) => b.application_name === 'pgboss').map((b) => b.pid),
      );
      queuePostgresSeconds += [...postgresCpuByPid]
        .filter(([pid]) => queueBackends.has(pid))
        .reduce((sum, [, s]) => sum + s, 0);
      if (profiler) {
        const { profile } = await profiler.post('Profiler.stop');
        if (CPU_PROFILE)
          writeFileSync(ROUNDS > 1 ? `${CPU_PROFILE}.${round + 1}` : CPU_PROFILE, JSON.stringify(profile));
      }
      if (process.env.BENCH_PG_STATS)
        console.log(
          'PGSTATS_WINDOW',
          new Date(Date.now() - workerSeconds * 1000).toISOString(),
          new Date().toISOString(),
        );
      const sample = await receiver.sample();
      verified ||= sample ? Boolean(new Webhook(hook.secret).verify(sample.body, sample.headers)) : false;
      const rawAfter = await rawPass();
      workerRates.push(DELIVERIES / workerSeconds);
      ratios.push(DELIVERIES / workerSeconds / ((rawRates.at(-1)! + rawAfter) / 2));
      rawRates.push(rawAfter);
    }
    profiler?.disconnect();
    clientProto.query = originalQuery;
    for (const [text, n] of [...statementCounts].sort((a, b) => b[1] - a[1])) say(`${n}\t${text}`);
    await agent.close();
    const worked = ROUNDS * DELIVERIES;
    const rawPasses = rawRates.length;

    // 3. Delay: status changes committed one by one at LATENCY_RATE/s while the worker runs.
    const count = LATENCY_RATE * LATENCY_SECONDS;
    const latencyIds = await insertLogs(count);
    await new Promise((resolve) => setTimeout(resolve, 1000));
    await receiver.reset();
    const committedAt = new Map<string, number>();
    const started = performance.now();
    for (let i = 0; i < count; i++) {
      const due = started + (i * 1000) / LATENCY_RATE;
      const wait = due - performance.now();
      if (wait > 0) await new Promise((resolve) => setTimeout(resolve, wait));
      const id = latencyIds[i]!;
      await moveToSent([id]);
      committedAt.set(id, Date.now());
    }
    let arrivals = new Map<string, number>();
    await waitUntil(
      async () => {
        arrivals = await receiver.arrivals();
        return arrivals.size >= count;
      },
      120_000,
      'the latency run to be delivered',
    );
    const delays = latencyIds.map((id) => arrivals.get(id)! - committedAt.get(id)!).sort((a, b) => a - b);

    say();
    say('| figure | value |');
    say('| --- | --- |');
    const list = (values: number[], digits = 0) => values.map((v) => v.toFixed(digits)).join(', ');
    say(
      `| webhook deliveries/s, batched worker → local receiver (${DELIVERIES} per run; each of ${ROUNDS} runs) | ${list(workerRates)}/s |`,
    );
    say(
      `| same process: raw undici POST loop, same payloads and signatures (each pass: before, between and after the worker's runs) | ${list(rawRates)}/s |`,
    );
    say(
      `| worker ÷ raw, median of the runs (each run ÷ the mean of the raw passes around it) | **${median(ratios).toFixed(2)}×** (${list(ratios, 2)}) (target ≥ 0.5×) |`,
    );
    say(
      `| status change committed → delivered, ${LATENCY_RATE}/s for ${LATENCY_SECONDS} s: p50 / p99 | ${percentile(delays, 50).toFixed(0)} / ${percentile(delays, 99).toFixed(0)} ms |`,
    );
    say(
      `| CPU per delivery: worker process / its PostgreSQL backends; raw loop's process | ${(nodeCpuMicros / worked).toFixed(0)} / ${((postgresCpuSeconds * 1e6) / worked).toFixed(0)} µs (queue's connections ${((queuePostgresSeconds * 1e6) / worked).toFixed(0)} µs); ${(rawCpuMicros / (rawPasses * DELIVERIES)).toFixed(0)} µs |`,
    );
    say(
      `| of which in the kernel (system CPU): worker / raw loop | ${(nodeSystemMicros / worked).toFixed(0)} µs / ${(rawSystemMicros / (rawPasses * DELIVERIES)).toFixed(0)} µs |`,
    );
    say(
      `| the receiver's CPU per request: worker's run / raw loop's | ${((receiverSeconds * 1e6) / worked).toFixed(0)} µs / ${((rawReceiverSeconds * 1e6) / (rawPasses * DELIVERIES)).toFixed(0)} µs |`,
    );
    say(`| load average (1 min) at the end | ${loadavg()[0]!.toFixed(2)} |`);
    say(`| a delivery verifies with standardwebhooks | ${verified ? 'yes' : 'NO'} |`);
  } finally {
    await queue.stop(2_000).catch(() => {});
    receiver.close();
    await database.close();
    const drop = new pg.Client({ connectionString: ADMIN_URL });
    await drop.connect();
    await drop.query(`drop database if exists ${name} with (force)`);
    await drop.end();
  }
}

main().then(
  () => process.exit(0),
  (error: unknown) => {
    console.error(error);
    process.exit(1);
  },
);
