/**
 * The one interface every email provider implements (ARCHITECTURE.md, "Layout":
 * `providers/<type>.ts`, one file per provider behind one EmailProvider interface).
 * The worker builds an {@link OutgoingEmail}, calls `send`, and decides from a thrown
 * {@link ProviderError}'s `permanent` flag whether the queue retries the job.
 */

/** One file attached to an email; `content` holds the raw bytes. */
export interface OutgoingAttachment {
  filename: string;
  content: Buffer;
  /** MIME type, e.g. `application/pdf`. */
  contentType: string;
}

/** A fully rendered email, ready for a provider. */
export interface OutgoingEmail {
  /** Sender, `addr@example.com` or `"Name" <addr@example.com>`. */
  from: string;
  /** One or more recipient addresses. */
  to: string[];
  /** Carbon-copy recipients (issue #10); `to` + `cc` + `bcc` hold at most 50 addresses. */
  cc?: string[];
  /** Blind carbon-copy recipients: in the envelope, never in a header. */
  bcc?: string[];
  /** Reply-To addresses. */
  replyTo?: string[];
  subject: string;
  html: string;
  /** Plain-text alternative of `html`. */
  text: string;
  attachments?: OutgoingAttachment[];
  /** Extra header lines, name → value. */
  headers?: Record<string, string>;
  /** The sender's tags (issue #10), see {@link EmailTags}; SMTP ignores them. */
  tags?: EmailTags;
  /** Message-ID header to set, with or without angle brackets; the provider generates one when omitted. */
  messageId?: string;
}

/**
 * The sender's tags on an email (issue #10 calls `tags` a string list): either a list of labels
 * (`["welcome", "onboarding"]`), which each provider gets in its own tag field (Resend and SES
 * tags named by the label with the value `true`, SendGrid categories, Mailgun `o:tag`, Postmark
 * `Tag`), or labels name → value (`{campaign: "spring"}`), which go to its tag or metadata field
 * (Resend and SES tags, SendGrid custom_args, Mailgun `v:` variables, Postmark Metadata).
 */
export type EmailTags = Record<string, string> | string[];

/** True when `tags` is the list form of {@link EmailTags}. */
export function isTagList(tags: EmailTags | undefined): tags is string[] {
  return Array.isArray(tags);
}

/** True when `tags` holds at least one label. */
export function hasTags(tags: EmailTags | undefined): tags is EmailTags {
  return tags !== undefined && Object.keys(tags).length > 0;
}

/** A recipient the provider refused while accepting the email for others (issue #11). */
export interface RefusedRecipient {
  /** The address as it was in the envelope. */
  address: string;
  /** True for a permanent refusal (SMTP 5xx: hard bounce), false for a temporary one (4xx: soft). */
  permanent: boolean;
  /** The reply, described as {@link ProviderError} messages are (`550 5.1.1 mailbox unavailable`). */
  diagnostic: string;
}

/** What a provider reports for an accepted email. */
export interface SendResult {
  /** The provider's id for the message: what its later events (bounces, deliveries) refer to. */
  providerMessageId: string;
  /** Recipients refused while others were accepted (SMTP RCPT replies); absent when none were. */
  refused?: RefusedRecipient[];
}

/** Options of one {@link EmailProvider.send}. */
export interface SendOptions {
  /**
   * Gives up on the send when it aborts (the worker's deadline, or the worker stopping). A send
   * given up before the message was transmitted throws a transient ProviderError; one given up
   * after it (the provider may have it) throws a ProviderError with `ambiguous` set.
   */
  signal?: AbortSignal;
}

/** A connection to one email provider, configured for one adapter. */
export interface EmailProvider {
  /**
   * Hands the email to the provider.
   * @throws ProviderError; `permanent` tells whether a retry can help, `ambiguous` whether the
   *   provider may have accepted the email anyway.
   */
  send(email: OutgoingEmail, options?: SendOptions): Promise<SendResult>;
  /**
   * Checks that the configuration works (connects, authenticates). Never throws: a failure is
   * `{success: false, message}` (spec: `POST /api/adapters/:id/test` answers a failing connection
   * with inner success false).
   */
  verify(): Promise<{ success: boolean; message: string }>;
  /** Releases connections; the provider must not be used afterwards. */
  close(): Promise<void>;
}

/** Options of a {@link ProviderError}. */
export interface ProviderErrorOptions {
  /** True when retrying the same email cannot help. */
  permanent: boolean;
  /** The provider's own error code, e.g. `EAUTH` or the SMTP reply code `550`. */
  providerCode?: string;
  /** The underlying error. */
  cause?: unknown;
  /**
   * True when the send was cut off after the whole message was transmitted but before the provider
   * confirmed it: the provider may have accepted it, so sending it again could deliver it twice.
   */
  ambiguous?: boolean;
  /**
   * For a send given up while its request goes on in the background (its connection still busy):
   * settles when that request ends. The caller holds the connection's slot until then, or the
   * next send would wait inside the connection pool, past its own deadline (review finding,
   * session 15).
   */
  settled?: Promise<void>;
}

/**
 * Thrown by providers. `permanent` = retrying cannot help (auth failure, rejected recipient 5xx,
 * invalid config); otherwise transient (network, 4xx SMTP, timeouts, 429/5xx HTTP), and the
 * queue retries with backoff (ARCHITECTURE.md, "The send path", step 3).
 */
export class ProviderError extends Error {
  readonly permanent: boolean;
  readonly providerCode?: string;
  readonly ambiguous: boolean;
  readonly settled?: Promise<void>;

  constructor(message: string, options: ProviderErrorOptions) {
    super(message, options.cause === undefined ? undefined : { cause: options.cause });
    this.name = 'ProviderError';
    this.permanent = options.permanent;
    this.ambiguous = options.ambiguous ?? false;
    if (options.providerCode !== undefined) this.providerCode = options.providerCode;
    if (options.settled !== undefined) this.settled = options.settled;
  }
}
