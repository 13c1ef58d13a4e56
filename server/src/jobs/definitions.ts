import { z } from 'zod';
import type { Config } from '../config.ts';
import type { RetryPolicy } from './queue.ts';

/**
 * Every job the system runs: name, payload schema and retry policy in one place
 * (CONVENTIONS.md "Jobs are declared in one registry"). Handlers are bound in registry.ts.
 * A `deadLetter` queue is declared before the queues that name it (definition order).
 */
const emailJobPayload = z.object({ emailId: z.string(), teamId: z.string() });
/**
 * `email.send` also carries the HTML and text part rendered when the send was accepted (issue #9
 * "Render once"): the worker sends them instead of rendering again. A job without them (queued
 * before this field existed) is rendered from the logged template version and variables, which
 * gives the same output.
 */
const sendJobPayload = emailJobPayload.extend({
  rendered: z.object({ html: z.string(), text: z.string() }).optional(),
});
const invitationJobPayload = z.object({ invitationId: z.string(), teamId: z.string() });

export const JOB_DEFINITIONS = {
  /**
   * Where `email.send` jobs go when they fail without the handler recording an outcome (the worker
   * stopped or timed out on the last attempt, or the payload was unreadable): records `failed`.
   */
  'email.send.failed': {
    payload: emailJobPayload,
    deadLetter: undefined,
    retry: (): RetryPolicy => ({ retryLimit: 5, retryDelaySeconds: 10, retryBackoff: true }),
  },
  'email.send': {
    payload: sendJobPayload,
    deadLetter: 'email.send.failed',
    /** Transient provider errors retry with exponential backoff (30 s, 60 s, 120 s, … by default). */
    retry: (config: Config): RetryPolicy => ({
      retryLimit: config.SEND_RETRY_LIMIT,
      retryDelaySeconds: config.SEND_RETRY_DELAY_SECONDS,
      retryBackoff: true,
    }),
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
    }),
  },
} as const;

export type JobName = keyof typeof JOB_DEFINITIONS;
export type JobPayload<N extends JobName> = z.infer<(typeof JOB_DEFINITIONS)[N]['payload']>;
export const EMAIL_SEND_JOB = 'email.send' satisfies JobName;
export const EMAIL_SEND_FAILED_JOB = 'email.send.failed' satisfies JobName;
export const INVITATION_SEND_JOB = 'invitation.send' satisfies JobName;
