import type { Database } from '../../db/client.ts';
import type { EmailLogRow } from './emails.repository.ts';
import { emailRepository } from './emails.repository.ts';
import { type StatusEvent, transitionMany } from './emails.status.service.ts';

/** What one delivery attempt ended with, as the worker records it. */
export type SendOutcome =
  /** The provider accepted the email. */
  | { kind: 'sent'; providerMessageId: string; attempt: number }
  /** The email ends `failed` (permanent error, last attempt, or a possibly delivered one). */
  | { kind: 'failed'; message: string; attempt: number; detail: Record<string, unknown> }
  /** A transient error; the job goes back to the queue for a retry. */
  | { kind: 'retry'; message: string; attempt: number };

interface Pending {
  log: Pick<EmailLogRow, 'id' | 'teamId'>;
  outcome: SendOutcome;
  resolve(): void;
  reject(error: unknown): void;
}

/** Delays between tries of a group whose transaction failed (ms); then `sent` is logged as lost. */
const RETRY_DELAYS_MS = [200, 1_000, 3_000];
/** How long the first outcome waits for others to share its transaction (ms). */
const LINGER_MS = 5;

/**
 * Records delivery outcomes by group commit: outcomes that arrive while a transaction is being
 * written wait for the next one, so a batch whose sends finish together is recorded in one
 * transaction (status moves + history through {@link transitionMany}, attempt counts), while a job
 * whose send finished early is not held back by the slowest send of its batch.
 *
 * `record` resolves once the outcome is committed. The "never send twice after a hand-off" rule:
 * a `sent` outcome never rejects — when the database stays unreachable after the retries, the loss
 * of its status is logged and it resolves, so its job completes instead of sending again. A
 * `failed` or `retry` outcome rejects then, so its job goes back to the queue.
 */
export class SendOutcomeRecorder {
  readonly #db: Database;
  #pending: Pending[] = [];
  #scheduled = false;

  constructor(db: Database) {
    this.#db = db;
  }

  /** Records `outcome` for `log`; resolves once committed (see the class for failures). */
  record(log: Pick<EmailLogRow, 'id' | 'teamId'>, outcome: SendOutcome): Promise<void> {
    return new Promise((resolve, reject) => {
      this.#pending.push({ log, outcome, resolve, reject });
      if (!this.#scheduled) {
        this.#scheduled = true;
        setTimeout(() => void this.#drain(), LINGER_MS);
      }
    });
  }

  /** Writes groups until nothing is pending; one group at a time. */
  async #drain(): Promise<void> {
    while (this.#pending.length > 0) {
      const group = this.#pending;
      this.#pending = [];
      await this.#write(group);
    }
    this.#scheduled = false;
  }

  async #write(group: Pending[]): Promise<void> {
    for (let attempt = 0; ; attempt++) {
      try {
        await this.#db.transaction(async (tx) => {
          const moves = group.flatMap((item) => {
            const event = statusEventOf(item.outcome);
            return event ? [{ email: item.log, event }] : [];
          });
          await transitionMany(tx, moves);
          await emailRepository.recordAttempts(
            tx,
            group.flatMap(({ log, outcome }) =>
              outcome.kind === 'retry'
                ? [
                    {
                      id: log.id,
                      teamId: log.teamId,
                      attemptCount: outcome.attempt,
                      errorMessage: outcome.message,
                    },
                  ]
                : [],
            ),
          );
        });
        for (const item of group) item.resolve();
        return;
      } catch (error) {
        const delay = RETRY_DELAYS_MS[attempt];
        if (delay !== undefined) {
          await new Promise((resolve) => setTimeout(resolve, delay));
          continue;
        }
        for (const item of group) {
          if (item.outcome.kind !== 'sent') {
            item.reject(error);
            continue;
          }
          console.error(
            `[email.send] ${item.log.id} was handed to the provider (${item.outcome.providerMessageId}) but its status could not be recorded:`,
            error instanceof Error ? error.message : error,
          );
          item.resolve();
        }
        return;
      }
    }
  }
}

/** The status event an outcome records (a retry records none: the email stays `queued`). */
function statusEventOf(outcome: SendOutcome): StatusEvent | undefined {
  switch (outcome.kind) {
    case 'sent':
      return {
        status: 'sent',
        detail: { attempt: outcome.attempt, providerMessageId: outcome.providerMessageId },
        set: {
          providerMessageId: outcome.providerMessageId,
          attemptCount: outcome.attempt,
          errorMessage: null,
        },
      };
    case 'failed':
      return {
        status: 'failed',
        detail: { attempt: outcome.attempt, error: outcome.message, ...outcome.detail },
        set: { errorMessage: outcome.message, attemptCount: outcome.attempt },
      };
    case 'retry':
      return undefined;
  }
}
