/**
 * The delivery baseline of the send benchmark: nodemailer's pooled SMTP transport (5 connections,
 * `maxMessages: Infinity`) sending `count` copies of the rendered sample email to the sink, all
 * queued at once. Each message carries `X-Bench-Id` so the sink can check it got each exactly once.
 *
 * It runs in the benchmark's own process (beside the sink), or as its own process like the worker
 * (`node raw-nodemailer.ts <root> <port> <count>`, see {@link rawNodemailerProcess}): sender and
 * sink on one thread exchange data without cross-process wake-ups, which makes the in-process
 * figure higher than any separate sender (the worker is one) can reach.
 */
import { fileURLToPath } from 'node:url';
import nodemailer from 'nodemailer';
import { renderTemplate } from '../../server/src/modules/rendering/index.ts';
import { startChild } from './processes.ts';
import { welcomeDesign } from './setup.ts';

/** Sends `count` messages to 127.0.0.1:`port`; returns the ids sent and the seconds it took. */
export async function rawNodemailer(
  root: string,
  port: number,
  count: number,
): Promise<{ ids: string[]; seconds: number }> {
  const rendered = await renderTemplate(
    { subject: 'Welcome, {{ first_name }}', designJson: welcomeDesign(root) },
    { first_name: 'Ada' },
  );
  const transport = nodemailer.createTransport({
    host: '127.0.0.1',
    port,
    secure: false,
    ignoreTLS: true,
    pool: true,
    maxConnections: 5,
    maxMessages: Infinity,
  });
  const ids = rawIds(count);
  const started = performance.now();
  try {
    await Promise.all(
      ids.map((id) =>
        transport.sendMail({
          from: 'Bench <bench@postwright.test>',
          to: 'user@example.test',
          subject: rendered.subject,
          html: rendered.html,
          text: rendered.text,
          headers: { 'X-Bench-Id': id },
        }),
      ),
    );
  } finally {
    transport.close();
  }
  return { ids, seconds: (performance.now() - started) / 1000 };
}

/** The ids {@link rawNodemailer} sends `count` messages with. */
export function rawIds(count: number): string[] {
  return Array.from({ length: count }, (_, i) => `raw-${i}`);
}

/** The line the child prints last: its CPU time while sending, µs (user + system). */
const CPU_LINE = /raw-nodemailer-cpu-us=(\d+)/;

/**
 * {@link rawNodemailer} in a child process (same Node.js binary), as the worker runs: resolves once
 * the child sent every message; returns the ids sent and the child's CPU time per message while
 * sending (µs; from its own process.cpuUsage, printed as its last line).
 * @throws when the child exits with an error.
 */
export async function rawNodemailerProcess(
  root: string,
  port: number,
  count: number,
): Promise<{ ids: string[]; cpuMicrosPerMessage: number }> {
  const child = startChild(
    fileURLToPath(import.meta.url),
    [root, String(port), String(count)],
    process.env,
    root,
  );
  const code = await new Promise<number | null>((resolve) => child.process.once('close', resolve));
  if (code !== 0) throw new Error(`raw nodemailer process exited with ${code}:\n${child.output()}`);
  const cpu = CPU_LINE.exec(child.output());
  return { ids: rawIds(count), cpuMicrosPerMessage: cpu ? Number(cpu[1]) / count : Number.NaN };
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const [root, port, count] = process.argv.slice(2);
  const before = process.cpuUsage();
  await rawNodemailer(root!, Number(port), Number(count));
  const used = process.cpuUsage(before);
  console.log(`raw-nodemailer-cpu-us=${used.user + used.system}`);
}
