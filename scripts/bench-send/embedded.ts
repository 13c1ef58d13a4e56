/**
 * The embedded phase of the send benchmark: `postwright start` (all roles) with a temp DATA_DIR
 * and no DATABASE_URL — whatever the embedded default is —, its idle memory right after start
 * (before anything is set up: that is "idle"), set up over HTTP, its memory again once set up
 * (saving the template queued its thumbnail, which loads the PDF renderer: reported, not judged),
 * accepted sends under load while it delivers, the drain rate into the sink, and whether every
 * accepted email arrived exactly once. Memory is printed as summed PSS and as the tree's distinct
 * resident pages (its PSS with nothing else running, see treeResidentBytes); the ≤ 150 MB target
 * is judged on the latter when /proc/<pid>/pagemap is readable (root), else on PSS.
 */
import { chmodSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { formatLoad, measureLoad, perSecond } from './load.ts';
import {
  type Child,
  freePort,
  megabytes,
  postwrightEnv,
  processTree,
  startPostwright,
  treeMemory,
  treeResidentBytes,
  waitReady,
} from './processes.ts';
import { setUpInstance, statusCounts } from './setup.ts';
import { drainSink, type Sink } from './sink.ts';

/** A target with its verdict and the measured value, as printed. */
export interface Target {
  name: string;
  ok: boolean;
  value: string;
}

/** Runs the phase; the started process and the data directory are left in `children`/`cleanups`. */
export async function embeddedPhase(o: {
  root: string;
  sink: Sink;
  setupToken: string;
  load: { connections: number; seconds: number; warmupSeconds: number };
  body: { templateId: string; to: string; variables: Record<string, unknown> };
  drainSeconds: number;
  say: (line?: string) => void;
  children: Child[];
  cleanups: (() => Promise<void> | void)[];
}): Promise<Target[]> {
  const targets: Target[] = [];
  const dataDir = mkdtempSync(path.join(tmpdir(), 'postwright-bench-'));
  // As root, the embedded PostgreSQL runs as "postgres", which must enter DATA_DIR (mkdtemp makes it 0700).
  chmodSync(dataDir, 0o755);
  o.cleanups.push(() => rmSync(dataDir, { recursive: true, force: true }));
  const port = await freePort();
  const baseUrl = `http://127.0.0.1:${port}`;
  const child = startPostwright(
    o.root,
    'all',
    postwrightEnv({ DATA_DIR: dataDir, SETUP_TOKEN: o.setupToken, PORT: String(port), BASE_URL: baseUrl }),
  );
  o.children.push(child);
  await waitReady(baseUrl, child);
  o.say();
  o.say('Embedded default: `postwright start` (all roles), temp DATA_DIR, no DATABASE_URL');
  await new Promise((resolve) => setTimeout(resolve, 10_000));
  const idle = memoryOf(child.process.pid!);
  o.say(`  idle memory (fresh start)      ${idle.text}`);
  // Not the issue's target: that one counts `npm start`'s whole tree, npm included, which only
  // `npm run bench:idle-memory` starts as a user does.
  o.say(
    `  (node + PostgreSQL only, ${megabytes(idle.judged)}; the ≤ 150 MB target is judged on the whole \`npm start\` tree by \`npm run bench:idle-memory\`)`,
  );
  const instance = await setUpInstance({
    baseUrl,
    setupToken: o.setupToken,
    root: o.root,
    smtpPort: o.sink.port,
    keyCount: o.load.connections,
  });
  await new Promise((resolve) => setTimeout(resolve, 5_000));
  // Not "idle": saving the template queued its thumbnail, which loaded the PDF renderer.
  o.say(`  after setup (thumbnail made)   ${memoryOf(child.process.pid!).text}`);
  o.sink.reset();
  const load = await measureLoad({
    url: `${baseUrl}/api/v1/send`,
    keys: instance.keys,
    body: { ...o.body, templateId: instance.templateId },
    connections: o.load.connections,
    seconds: o.load.seconds,
    warmupSeconds: o.load.warmupSeconds,
  });
  o.say(formatLoad('accept (delivering meanwhile)', load));
  // Every log is an accepted send (autocannon does not count answers after its end): wait
  // until the count stops moving, i.e. the requests still in flight are answered.
  let accepted = -1;
  for (let i = 0; i < 60; i++) {
    await new Promise((resolve) => setTimeout(resolve, 1_000));
    const total = (await statusCounts(baseUrl, instance.cookie)).total ?? 0;
    if (total === accepted) break;
    accepted = total;
  }
  const result = await drainSink(o.sink, o.drainSeconds, accepted);
  const sent = (await statusCounts(baseUrl, instance.cookie)).sent ?? 0;
  await child.stop();
  const duplicates = [...o.sink.counts.values()].filter((n) => n > 1).length;
  const ok = result.complete && duplicates === 0 && o.sink.counts.size === accepted && sent === accepted;
  o.say(
    `  ${'delivery'.padEnd(30)} ${perSecond(result.rate).padStart(9)}${result.complete ? '' : `   (NOT drained within ${o.drainSeconds} s)`}`,
  );
  const text = `${accepted} accepted (logged), ${sent} recorded sent, ${o.sink.counts.size} distinct delivered, ${duplicates} more than once`;
  o.say(`  exactly once: ${ok ? 'yes' : 'NO'} — ${text}`);
  targets.push({ name: 'embedded: each accepted email delivered exactly once', ok, value: text });
  return targets;
}

/**
 * The memory of the process tree under `pid`: `judged` is its distinct resident pages (bytes) when
 * /proc/<pid>/pagemap is readable, else its summed PSS; `text` shows both, and the RSS sum.
 */
function memoryOf(pid: number): { judged: number; text: string } {
  const memory = treeMemory(pid);
  const alone = treeResidentBytes(processTree(pid));
  const head = `PSS ${megabytes(memory.pss)} (RSS ${megabytes(memory.rss)}), ${memory.processes} process(es)`;
  return alone === undefined
    ? { judged: memory.pss, text: `${head}, distinct pages unknown (pagemap needs root)` }
    : { judged: alone, text: `${head}, alone (distinct pages) ${megabytes(alone)}` };
}
