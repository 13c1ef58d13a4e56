import { z } from 'zod';
import type { Config } from '../config.ts';

/**
 * Every job the system runs: name, payload schema and retry policy in one place
 * (CONVENTIONS.md "Jobs are declared in one registry"). The modules bring their handlers
 * (registry.ts `JobHandlers`), which the composition root passes to `startWorkers`.
 * A `deadLetter` queue is declared before the queues that name it (definition order).
 */
const emailJobPayload = z.object({ emailId: z.string(), teamId: z.string() });
/**
 * `email.send` may carry the HTML and text part rendered when the send was accepted, which the
 * worker then sends instead of rendering again. The accept path no longer writes them (issue #9,
 * send.service.ts acceptSend: the worker renders from the logged template version and variables,
 * which gives the same output); jobs queued with them are still sent as they are.
 */
const sendJobPayload = emailJobPayload.extend({
  rendered: z.object({ html: z.string(), text: z.string() }).optional(),
  /** cc, bcc, replyTo, headers, tags and whether attachments are stored (issue #10, send-fields.ts). */
  fields: z
    .object({
      cc: z.array(z.string()).optional(),
      bcc: z.array(z.string()).optional(),
      replyTo: z.array(z.string()).optional(),
      headers: z.record(z.string(), z.string()).optional(),
      tags: z.union([z.array(z.string()), z.record(z.string(), z.string())]).optional(),
      attachments: z.boolean().optional(),
      /** The send's tracking override (issue #11, modules/tracking). */
      trackOpens: z.boolean().optional(),
      trackClicks: z.boolean().optional(),
    })
    .optional(),
});
const invitationJobPayload = z.object({ invitationId: z.string(), teamId: z.string() });
/** A template whose thumbnail to (re)take (issue #12). */
const thumbnailJobPayload = z.object({ templateId: z.string(), teamId: z.string() });
/**
 * Retry policy of a queue: attempts after the first, delay in seconds, exponential backoff and,
 * with backoff, the longest delay between two attempts in seconds (none when unset).
 */
export interface RetryPolicy {
  retryLimit: number;
  retryDelaySeconds: number;
  retryBackoff: boolean;
  retryDelayMaxSeconds?: number | undefined;
}

/**
 * The longest wait (s) between two attempts of a send (`email.send`, `invitation.send`): 6 h.
 * pg-boss deletes a job still waiting past its `keep_until` (its retention: 14 days by default,
 * `start_after` + 31 days for a scheduled email, accept-batcher.ts), and a retry does not move
 * `keep_until`; uncapped, pg-boss's backoff (`retryDelay * 2^min(16, n) / 2 * (1 + random)`)
 * adds up past 14 days from the 9th retry with SEND_RETRY_DELAY_SECONDS=3600, from the 16th with
 * 30 s, and the email, deleted with its job, stayed `queued` for ever (review finding, time 1).
 * Capped, the most config.ts allows (SEND_RETRY_LIMIT 20) waits at most 20 × 6 h = 5 days in all;
 * pg-boss applies the cap after its jitter (plans.js failJobs: `LEAST(retry_delay_max, …)`).
 */
export const SEND_RETRY_DELAY_MAX_SECONDS = 6 * 3600;

/** pg-boss fails a job still active after this long (its worker is presumed gone). */
const DEFAULT_EXPIRE_SECONDS = 300;

export const JOB_DEFINITIONS = {
  /**
   * Where `email.send` jobs go when they fail without the handler recording an outcome (the worker
   * stopped or timed out on the last attempt, or the payload was unreadable): records `failed`.
   */
  'email.send.failed': {
    payload: emailJobPayload,
    deadLetter: undefined,
    retry: (): RetryPolicy => ({ retryLimit: 5, retryDelaySeconds: 10, retryBackoff: true }),
    expireInSeconds: (): number => DEFAULT_EXPIRE_SECONDS,
  },
  'email.send': {
    payload: sendJobPayload,
    deadLetter: 'email.send.failed',
    /**
     * Transient provider errors retry with exponential backoff (30 s, 60 s, 120 s, … by default),
     * at most {@link SEND_RETRY_DELAY_MAX_SECONDS} apart.
     */
    retry: (config: Config): RetryPolicy => ({
      retryLimit: config.SEND_RETRY_LIMIT,
      retryDelaySeconds: config.SEND_RETRY_DELAY_SECONDS,
      retryBackoff: true,
      retryDelayMaxSeconds: SEND_RETRY_DELAY_MAX_SECONDS,
    }),
    /**
     * One team's emails form one concurrency group: the worker keeps at most
     * {@link teamSendsInFlight} of them in flight across all workers, so a team whose provider is
     * slow never holds the slots other teams' emails need (issue #8).
     */
    group: (payload: z.infer<typeof emailJobPayload>): string => payload.teamId,
    /**
     * An email may wait behind up to 3 sends of its adapter (team cap 4 × connections), then send:
     * 4 deadlines, plus room to render and record.
     */
    expireInSeconds: (config: Config): number =>
      Math.max(DEFAULT_EXPIRE_SECONDS, 5 * config.SEND_TIMEOUT_SECONDS),
    /** A killed worker's emails are retried after this, not after their expiry. */
    heartbeatSeconds: 20,
  },
  /**
   * Sends a team invitation's email (issue #3) through the team's sending adapter; enqueued in the
   * transaction that creates or renews the invitation. Retries transient provider errors as
   * `email.send` does; a permanent error or the last attempt is logged (no dead letter: the
   * invitation itself is unaffected and its link stays usable).
   */
  'invitation.send': {
    payload: invitationJobPayload,
    deadLetter: undefined,
    retry: (config: Config): RetryPolicy => ({
      retryLimit: config.SEND_RETRY_LIMIT,
      retryDelaySeconds: config.SEND_RETRY_DELAY_SECONDS,
      retryBackoff: true,
      retryDelayMaxSeconds: SEND_RETRY_DELAY_MAX_SECONDS,
    }),
    expireInSeconds: (): number => DEFAULT_EXPIRE_SECONDS,
  },
  /**
   * Takes a template's thumbnail (issue #12), enqueued in the transaction that saves its design:
   * a PNG screenshot through the PDF renderer, stored, set as `thumbnailUrl`. A failure never
   * touches the template; two retries, then the old thumbnail stays.
   */
  'template.thumbnail': {
    payload: thumbnailJobPayload,
    deadLetter: undefined,
    retry: (): RetryPolicy => ({ retryLimit: 2, retryDelaySeconds: 10, retryBackoff: true }),
    expireInSeconds: (): number => DEFAULT_EXPIRE_SECONDS,
  },
} as const;

export type JobName = keyof typeof JOB_DEFINITIONS;
export type JobPayload<N extends JobName> = z.infer<(typeof JOB_DEFINITIONS)[N]['payload']>;
export const EMAIL_SEND_JOB = 'email.send' satisfies JobName;
export const EMAIL_SEND_FAILED_JOB = 'email.send.failed' satisfies JobName;
export const INVITATION_SEND_JOB = 'invitation.send' satisfies JobName;
export const TEMPLATE_THUMBNAIL_JOB = 'template.thumbnail' satisfies JobName;

/**
 * Emails of one team in flight at once across all workers (the `email.send` group cap): four times
 * the connections one worker opens to an adapter, so each connection has its next emails rendered
 * and ready (measured: 2× held a single team to ~70 % of the throughput 4× reaches), while a
 * slow team holds at most this many of a worker's WORKER_CONCURRENCY slots.
 */
export function teamSendsInFlight(config: Pick<Config, 'ADAPTER_MAX_CONNECTIONS'>): number {
  return 4 * config.ADAPTER_MAX_CONNECTIONS;
}

/** The concurrency group a job of `name` with payload `data` belongs to, if its definition names one. */
export function groupOf(name: string, data: unknown): string | undefined {
  const definition = JOB_DEFINITIONS[name as JobName];
  if (!definition || !('group' in definition)) return undefined;
  const parsed = definition.payload.safeParse(data);
  // Each definition's group reads its own payload, which `parsed` is (hence the widening).
  const group = definition.group as (payload: unknown) => string;
  return parsed.success ? group(parsed.data) : undefined;
}
