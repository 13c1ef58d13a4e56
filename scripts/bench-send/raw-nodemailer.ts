/**
 * The delivery baseline of the send benchmark: nodemailer's pooled SMTP transport (5 connections,
 * `maxMessages: Infinity`) sending `count` copies of the rendered sample email to the sink, all
 * queued at once. Each message carries `X-Bench-Id` so the sink can check it got each exactly once.
 */
import nodemailer from 'nodemailer';
import { renderTemplate } from '../../server/src/modules/rendering/index.ts';
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
  const ids = Array.from({ length: count }, (_, i) => `raw-${i}`);
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
