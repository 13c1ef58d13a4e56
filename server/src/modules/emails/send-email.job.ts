import type { Config } from '../../config.ts';
import type { Database } from '../../db/client.ts';
import { AppError } from '../../http/errors.ts';
import type { JobPayload } from '../../jobs/definitions.ts';
import { type BatchHandler, type ClaimedJob, type QueuedJob, SETTLED } from '../../jobs/queue.ts';
import type { JobHandlers, WorkerDeps } from '../../jobs/registry.ts';
import { type ProviderCache, ProviderError, SendSlots } from '../../providers/index.ts';
import { trackEmailHtml } from '../../tracking/track-html.ts';
import { ConfigDecryptionError, providerFor } from '../adapters/index.ts';
import { findSuppression } from '../suppressions/index.ts';
import { emailRepository } from './emails.repository.ts';
import { transition } from './emails.status.service.ts';
import { renderLoggedEmailWith } from './logs.service.ts';
import { refusedOutcomesOf } from './recipient-outcomes.ts';
import { needsSuppressionCheck, type PreparedSend, recipientsOf, SendBatchLoader } from './send-batch.ts';
import { sendWithFallback } from './send-fallback.ts';
import { outgoingFieldsFor } from './send-fields.ts';
import { type SendOutcome, SendOutcomeRecorder } from './send-outcome-recorder.ts';

/** An error that retrying cannot fix: the email ends `failed` at once. */
class PermanentSendError extends Error {}

/** The `errorMessage` of an email whose adapter config does not decrypt with ENCRYPTION_KEY. */
const UNREADABLE_CONFIG_MESSAGE =
  "The adapter's configuration cannot be read with the server's current ENCRYPTION_KEY (saved under another key, or damaged): enter the adapter's configuration again, then resend";

/** What the `email.send` handler needs; SMTP_ALLOW_PRIVATE sets the providers' outbound policy. */
export interface SendEmailDeps {
  db: Database;
  encryptionKey: Buffer;
  /** The context's open providers (one connection pool per adapter). */
  providers: ProviderCache;
  config: Pick<
    Config,
    'SEND_TIMEOUT_SECONDS' | 'ADAPTER_MAX_CONNECTIONS' | 'SMTP_ALLOW_PRIVATE' | 'BASE_URL'
  >;
}

/**
 * The `email.send` batch handler (ARCHITECTURE.md "The send path" 3; issues #8, #9). Per batch:
 * loads the logs, adapters, template versions and suppressed recipients in a few queries
 * ({@link SendBatchLoader}); then per email, concurrently: waits for one of the adapter's
 * ADAPTER_MAX_CONNECTIONS send slots ({@link SendSlots}), looks its recipients up in the
 * suppression list again if it waited longer than SUPPRESSION_FRESH_MS, renders the logged version
 * with the logged variables, hands it to the adapter's pooled provider under a deadline of
 * SEND_TIMEOUT_SECONDS, and records the outcome through a
 * group commit ({@link SendOutcomeRecorder}), which completes (or fails, for a retry) the job in
 * the same transaction. Each job's promise settles when its own email is recorded.
 *
 * Rules (unchanged from the one-job handler):
 * - success: `sent` with `sentAt` and `providerMessageId`; the job completes even if recording
 *   fails, so a handed-off email is never sent twice;
 * - permanent error (5xx, bad config, a config that does not decrypt with ENCRYPTION_KEY, disabled
 *   or deleted adapter, template that no longer renders, a recipient on the team's suppression
 *   list: "suppressed: <reason>", the provider not called), or a transient one on the last attempt:
 *   `failed` with `errorMessage`; a render that hit a rendering limit counts as transient (see
 *   isRenderBudgetExceeded);
 * - transient error (4xx, network, deadline passed before the message was transmitted): the attempt
 *   count and error are recorded and the job is thrown back to the queue, which retries with backoff;
 * - deadline passed (or worker stopping) AFTER the whole message was transmitted, before the server
 *   confirmed it: the server may have accepted it (RFC 5321 4.1.1.4), so it is NOT retried — `failed`
 *   with an errorMessage saying it may have been delivered, and `ambiguous: true` in its history;
 *   a person can resend it after checking;
 * - an email no longer `queued` (an earlier attempt finished it) is left alone.
 */
export function createSendEmailHandler(deps: SendEmailDeps): BatchHandler<JobPayload<'email.send'>> {
  const loader = new SendBatchLoader();
  const recorder = new SendOutcomeRecorder(deps.db);
  const slots = new SendSlots();
  return (jobs) => {
    const prepared = loader.load(
      deps.db,
      jobs.map((job) => job.data),
    );
    return jobs.map(async (job, index): Promise<undefined | typeof SETTLED> => {
      const item = (await prepared)[index]!;
      if (item.kind === 'skip') return;
      const outcome = await attempt(deps, slots, job, item);
      // The outcome and the job's settling commit together; SETTLED leaves nothing to the loop.
      if ((await recorder.record(item.log, outcome, job)) === SETTLED) return SETTLED;
      if (outcome.kind === 'retry') throw new Error(outcome.message);
    });
  };
}

/** Renders and sends one prepared email; returns what to record (never throws). */
async function attempt(
  deps: SendEmailDeps,
  slots: SendSlots,
  job: ClaimedJob<JobPayload<'email.send'>>,
  item: Exclude<PreparedSend, { kind: 'skip' }>,
): Promise<SendOutcome> {
  const attemptNumber = job.retryCount + 1;
  try {
    // Includes a suppressed recipient found with the batch's load: failed, the provider never called.
    if (item.kind === 'unsendable') throw new PermanentSendError(item.message);
    const { log, adapter, version } = item;
    const maxConnections = deps.config.ADAPTER_MAX_CONNECTIONS;
    const provider = providerFor(deps, adapter);
    // One slot per pooled connection: the deadline starts when this email's send can start. A
    // worker that starts stopping gives up the wait (nothing sent; the email is retried) and lets
    // the sends in progress finish (review finding, session 18: a stop cut them after 10 s).
    const release = await slots.acquire(adapter.id, maxConnections, [job.signal, job.stopping]);
    let deadline: ReturnType<typeof sendDeadline> | undefined;
    // A send given up while its request goes on keeps its connection busy until that request ends:
    // so does its slot (ProviderError.settled), or the next send waited inside the pool past its
    // deadline and was called ambiguous (review finding, session 15).
    let background: Promise<void> | undefined;
    try {
      // Issue #10: cc, bcc, replyTo, headers, tags, attachments. Loaded once the email holds a
      // slot: loaded before, the attachments of every email waiting for one were held at once (up
      // to 60 per team, each up to 70 MB with its PDFs; review finding, session 15).
      // Looked up with the batch; again when that was too long ago (or failed): an address
      // suppressed while this email waited for its slot does not get it.
      if (needsSuppressionCheck(item)) {
        const found = await findSuppression(deps.db, log.teamId, recipientsOf(log, job.data.fields));
        if (found) throw new PermanentSendError(`suppressed: ${found.reason}`);
      }
      const extra = await outgoingFieldsFor(deps.db, log, job.data.fields);
      deadline = sendDeadline(deps.config.SEND_TIMEOUT_SECONDS, job.signal);
      // The job carries no HTML (issue #9, README "Performance": the worker renders HTML and text
      // from the logged version and variables); jobs queued by earlier builds still carry theirs.
      // The subject is always the logged one: it holds the send's rendered `subject` override
      // (issue #10). Rendered once this email holds a connection slot, not for the whole batch up
      // front: a batch rendered at once blocks the event loop for tens of milliseconds while every
      // pooled connection waits for its next message (measured as 25-60 ms event-loop lag).
      const rendered = job.data.rendered
        ? { subject: log.subject, ...job.data.rendered }
        : { ...(await renderLoggedEmailWith(version, log)), subject: log.subject };
      // Issue #10: on the last attempt a retryable failure tries the adapter's fallback.
      const lastAttempt = job.retryCount >= job.retryLimit;
      const result = await sendWithFallback(
        deps,
        { log, adapter, lastAttempt },
        provider,
        {
          ...extra.message,
          from: log.fromAddress,
          to: log.toAddresses,
          subject: rendered.subject,
          // Issue #11: open pixel and click links, per the template version and the send's override.
          html: trackEmailHtml(rendered.html, { log, version, fields: job.data.fields }, deps),
          text: rendered.text,
          headers: { ...extra.message.headers, 'X-Postwright-Email-Id': log.id },
        },
        { signal: deadline.signal },
      ).catch((error: unknown) => {
        if (error instanceof ProviderError) background = error.settled;
        throw error;
      });
      // Issue #11: recipients refused while others were accepted are recorded, the email is `sent`.
      const refused =
        result.refused && refusedOutcomesOf(result.refused, { to: log.toAddresses, ...extra.message });
      return {
        kind: 'sent',
        providerMessageId: result.providerMessageId,
        attempt: attemptNumber,
        ...(refused ? { refused } : {}),
      };
    } finally {
      deadline?.clear();
      // Bounded, to one more send deadline: an SDK without a request timeout (mailgun.js,
      // @sendgrid/client) may never end a hung request, and its slot was then never given back
      // (review finding, session 15).
      if (background)
        void settledWithin(background, deps.config.SEND_TIMEOUT_SECONDS * 1000).finally(release);
      else release();
    }
  } catch (error) {
    const message = error instanceof Error ? error.message : String(error);
    // Given up waiting for a connection because the worker is stopping: nothing was sent, and the
    // email goes back without the attempt counted, also on its last attempt (review finding,
    // session 18: it ended failed, with SEND_RETRY_LIMIT=0 every waiting email did).
    if (
      job.stopping.aborted &&
      error instanceof ProviderError &&
      error.providerCode === 'EABORT' &&
      !error.ambiguous
    ) {
      return { kind: 'retry', message, attempt: attemptNumber, unattempted: true };
    }
    if (error instanceof ProviderError && error.ambiguous) {
      return {
        kind: 'failed',
        message,
        attempt: attemptNumber,
        detail: { permanent: false, ambiguous: true },
      };
    }
    // The adapter's config does not decrypt (ENCRYPTION_KEY changed since it was saved): no retry
    // can read it, so it fails now, saying what to do; it was retried as transient (review
    // finding, integrity 3).
    if (error instanceof ConfigDecryptionError) {
      return {
        kind: 'failed',
        message: UNREADABLE_CONFIG_MESSAGE,
        attempt: attemptNumber,
        detail: { permanent: true },
      };
    }
    const permanent =
      error instanceof PermanentSendError ||
      (error instanceof AppError && !isRenderBudgetExceeded(error)) ||
      (error instanceof ProviderError && error.permanent);
    if (permanent || job.retryCount >= job.retryLimit) {
      return { kind: 'failed', message, attempt: attemptNumber, detail: { permanent } };
    }
    return { kind: 'retry', message, attempt: attemptNumber };
  }
}

/**
 * True for a render stopped by a rendering limit. The template rendered within its limits when the
 * email was accepted, and the time limit is wall time (a loaded machine can trip it), so this is
 * retried like a transient error; a limit the template really exceeds trips again on every attempt
 * and the email ends `failed` after the retries.
 */
function isRenderBudgetExceeded(error: AppError): boolean {
  return error.code === 'INVALID_TEMPLATE' && error.details.reason === 'LIMIT_EXCEEDED';
}

/**
 * A signal that aborts after `seconds` (the overall deadline of one send once it has its slot:
 * connecting and the whole SMTP dialogue; issue #8), or when `jobSignal` does.
 */
function sendDeadline(seconds: number, jobSignal: AbortSignal): { signal: AbortSignal; clear(): void } {
  // One controller and a listener rather than AbortSignal.any: this runs once per email.
  const controller = new AbortController();
  const timer = setTimeout(
    () => controller.abort(new Error(`no answer within the ${seconds} s send deadline`)),
    seconds * 1000,
  );
  const onJobAbort = () => controller.abort(jobSignal.reason);
  if (jobSignal.aborted) onJobAbort();
  else jobSignal.addEventListener('abort', onJobAbort, { once: true });
  return {
    signal: controller.signal,
    clear: () => {
      clearTimeout(timer);
      jobSignal.removeEventListener('abort', onJobAbort);
    },
  };
}

/**
 * The `email.send.failed` (dead-letter) handler: an `email.send` job ended without its handler
 * recording an outcome — the worker was killed (heartbeat lapsed), stopped, or the job expired on
 * its last attempt. A still-`queued` email is recorded `failed`, so none stays queued for ever.
 */
export function createUndeliveredEmailHandler(deps: { db: Database }) {
  return async function recordUndelivered(job: QueuedJob<JobPayload<'email.send.failed'>>): Promise<void> {
    const { emailId, teamId } = job.data;
    const log = await emailRepository.findLog(deps.db, teamId, emailId);
    if (log?.status !== 'queued') return;
    const message = 'Delivery did not complete: every attempt was interrupted (worker stopped or timed out)';
    await deps.db.transaction((tx) =>
      transition(tx, log, {
        status: 'failed',
        detail: { error: message, deadLetter: true },
        set: { errorMessage: message },
      }),
    );
  };
}

/**
 * The emails module's job bindings, for the composition root to pass to `startWorkers`:
 * `email.send` in a claim loop (batches), `email.send.failed` one job at a time.
 */
export function emailJobHandlers(deps: WorkerDeps): Pick<JobHandlers, 'email.send' | 'email.send.failed'> {
  return {
    'email.send': { kind: 'batch', handle: createSendEmailHandler(deps) },
    'email.send.failed': { kind: 'job', handle: createUndeliveredEmailHandler(deps) },
  };
}

/** `promise`, or a timer of `ms` when that comes first (its outcome ignored; never rejects). */
function settledWithin(promise: Promise<void>, ms: number): Promise<void> {
  let timer: NodeJS.Timeout | undefined;
  const limit = new Promise<void>((resolve) => {
    timer = setTimeout(resolve, ms);
    timer.unref();
  });
  return Promise.race([promise.catch(() => {}), limit]).finally(() => clearTimeout(timer));
}
