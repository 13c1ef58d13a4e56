import type { Database } from '../../db/client.ts';
import { AppError } from '../../http/errors.ts';
import type { JobPayload } from '../../jobs/definitions.ts';
import type { QueuedJob } from '../../jobs/queue.ts';
import { getProvider, ProviderError } from '../../providers/index.ts';
import { type AdapterType, adapterConfig, findAdapter } from '../adapters/index.ts';
import { type EmailLogRow, emailRepository } from './emails.repository.ts';
import { renderLoggedEmail } from './logs.service.ts';

/** An error that retrying cannot fix: the email ends `failed` at once. */
class PermanentSendError extends Error {}

/**
 * The `email.send` job handler (ARCHITECTURE.md "The send path" 3): renders the logged template
 * version with the logged variables, sends through the logged adapter, records `sent` with
 * `sentAt` and `providerMessageId`.
 * Transient provider errors are thrown back to the queue, which retries with backoff; a permanent
 * error, or a transient one on the last attempt, records `failed` with `errorMessage`.
 * An email no longer `queued` (already processed by an earlier attempt) is left alone.
 */
export function createSendEmailHandler(deps: { db: Database; encryptionKey: Buffer }) {
  return async function sendEmail(job: QueuedJob<JobPayload<'email.send'>>): Promise<void> {
    const { emailId, teamId } = job.data;
    const log = await emailRepository.findLog(deps.db, teamId, emailId);
    if (log?.status !== 'queued') return;
    const attempt = job.retryCount + 1;
    let providerMessageId: string;
    try {
      providerMessageId = await deliver(deps, log, job.data.rendered);
    } catch (error) {
      const message = error instanceof Error ? error.message : String(error);
      const permanent =
        error instanceof PermanentSendError ||
        error instanceof AppError ||
        (error instanceof ProviderError && error.permanent);
      if (permanent || job.retryCount >= job.retryLimit) {
        await deps.db.transaction((tx) =>
          emailRepository.recordStatus(
            tx,
            log,
            'failed',
            { errorMessage: message, attemptCount: attempt },
            { attempt, error: message, permanent },
          ),
        );
        return;
      }
      await emailRepository.recordAttempt(deps.db, log.id, attempt, message);
      throw error;
    }
    // The provider has the email now: the job must not go back to the queue, or a retry would send
    // it twice. Recording `sent` gets its own short retries instead.
    await recordSent(deps.db, log, providerMessageId, attempt);
  };
}

/** Delays between tries of recording `sent` after a successful hand-off (ms). */
const RECORD_SENT_DELAYS_MS = [200, 1_000, 3_000];

/**
 * Records `sent` for an email the provider accepted, trying again briefly on a database error.
 * When the database stays unreachable it logs the loss of the status (the email itself went out)
 * rather than failing the job, which would send the email again.
 */
async function recordSent(
  db: Database,
  log: EmailLogRow,
  providerMessageId: string,
  attempt: number,
): Promise<void> {
  for (let i = 0; ; i++) {
    try {
      await db.transaction((tx) =>
        emailRepository.recordStatus(
          tx,
          log,
          'sent',
          { providerMessageId, attemptCount: attempt, errorMessage: null },
          { attempt, providerMessageId },
        ),
      );
      return;
    } catch (error) {
      const delay = RECORD_SENT_DELAYS_MS[i];
      if (delay === undefined) {
        console.error(
          `[email.send] ${log.id} was handed to the provider (${providerMessageId}) but its status could not be recorded:`,
          error instanceof Error ? error.message : error,
        );
        return;
      }
      await new Promise((resolve) => setTimeout(resolve, delay));
    }
  }
}

/**
 * The `email.send.failed` (dead-letter) handler: an `email.send` job ended without its handler
 * recording an outcome — the worker stopped or timed out on the last attempt, or the job was
 * unreadable. A still-`queued` email is recorded `failed`, so none stays queued for ever.
 */
export function createUndeliveredEmailHandler(deps: { db: Database }) {
  return async function recordUndelivered(job: QueuedJob<JobPayload<'email.send.failed'>>): Promise<void> {
    const { emailId, teamId } = job.data;
    const log = await emailRepository.findLog(deps.db, teamId, emailId);
    if (log?.status !== 'queued') return;
    const message = 'Delivery did not complete: every attempt was interrupted (worker stopped or timed out)';
    await deps.db.transaction((tx) =>
      emailRepository.recordStatus(
        tx,
        log,
        'failed',
        { errorMessage: message },
        { error: message, deadLetter: true },
      ),
    );
  };
}

/**
 * Hands the email to its adapter's provider with the HTML and text rendered at accept time, or
 * rendered now when the job does not carry them; returns the provider's message id.
 */
async function deliver(
  deps: { db: Database; encryptionKey: Buffer },
  log: EmailLogRow,
  prerendered: { html: string; text: string } | undefined,
): Promise<string> {
  const adapter = await findAdapter(deps.db, log.teamId, log.adapterId);
  if (!adapter) throw new PermanentSendError('The adapter this email was queued for was deleted');
  if (!adapter.isActive) throw new PermanentSendError(`Adapter "${adapter.name}" is disabled`);
  const rendered = prerendered
    ? { subject: log.subject, ...prerendered }
    : await renderLoggedEmail(deps.db, log);
  const provider = getProvider(
    adapter.id,
    adapter.type as AdapterType,
    adapterConfig(adapter, deps.encryptionKey),
    adapter.updatedAt.toISOString(),
  );
  const result = await provider.send({
    from: log.fromAddress,
    to: log.toAddresses,
    subject: rendered.subject,
    html: rendered.html,
    text: rendered.text,
    headers: { 'X-Postwright-Email-Id': log.id },
  });
  return result.providerMessageId;
}
