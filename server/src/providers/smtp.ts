import type { SMTPPoolOptions } from 'nodemailer';
import { z } from 'zod';
import { isHostOrAddress } from '../host-name.ts';
import { connectOutbound, DEFAULT_OUTBOUND_POLICY, type OutboundPolicy } from '../outbound/index.ts';
import type { ProviderDefinition } from './definition.ts';
import { lazyModule } from './lazy-module.ts';
import { composeMessage } from './mime-compose.ts';
import { classifySmtpError, refusedRecipientsOf } from './smtp-errors.ts';
import { markTransmission, type TransmissionMark, transmissionOption } from './smtp-transmission.ts';
import {
  type EmailProvider,
  type OutgoingEmail,
  ProviderError,
  type SendOptions,
  type SendResult,
} from './types.ts';

export { classifySmtpError } from './smtp-errors.ts';

/**
 * How an `smtp` adapter uses TLS besides `secure` (issue #8): `auto` (the default when omitted)
 * upgrades with STARTTLS when offered, and insists on it whenever credentials are set, so a
 * man-in-the-middle who strips STARTTLS cannot read the AUTH exchange; `none` never uses TLS and
 * sends credentials in plaintext (lab servers only).
 */
export const SMTP_TLS_MODES = ['auto', 'none'] as const;

/**
 * An SMTP server's address: a host name or an IP address, IPv6 without brackets
 * ({@link isHostOrAddress}); surrounding spaces are trimmed. A name outside ASCII is refused:
 * neither the system resolver nor the TLS name check converts it, so it must be given in its
 * `xn--` form.
 * Review finding, session 18: NUL, control and bidi characters were accepted and only failed at
 * the first send.
 */
const smtpHost = z
  .string()
  .trim()
  .min(1)
  .refine(
    isHostOrAddress,
    'must be a host name (letters, digits, hyphens and dots; an internationalised name in its xn-- form) or an IP address',
  );

/**
 * `smtp`: host ({@link smtpHost}), port 1-65535, optional secure (TLS from the first byte), optional credentials
 * (spec, "Adapter"), and the optional `tls` mode ({@link SMTP_TLS_MODES}; not in the spec's list,
 * added by issue #8). `secure: true` with `tls: "none"` contradicts itself and is refused.
 */
export const smtpConfigSchema = z
  .strictObject({
    host: smtpHost,
    port: z.number().int().min(1).max(65535),
    secure: z.boolean().optional(),
    username: z.string().optional(),
    password: z.string().optional(),
    tls: z.enum(SMTP_TLS_MODES).optional(),
  })
  .refine((config) => !(config.secure === true && config.tls === 'none'), {
    path: ['tls'],
    message: '"none" cannot be combined with secure: true (TLS from the first byte)',
  });

export type SmtpConfig = z.output<typeof smtpConfigSchema>;

/**
 * The `smtp` adapter type: any SMTP server, through one pooled nodemailer transport
 * (https://nodemailer.com/smtp/pooled/) per provider instance.
 */

/** Timeouts of one SMTP connection, in ms (nodemailer's own defaults are 2 min / 30 s / 10 min). */
export const SMTP_TIMEOUTS_MS = {
  /** TCP (and TLS for `secure`) connection established. */
  connection: 10_000,
  /** Server greeting (220) received after connecting. */
  greeting: 10_000,
  /** Inactivity on an open connection, e.g. a server that stops answering mid-DATA. */
  socket: 60_000,
} as const;

/**
 * nodemailer (~5 MB of heap) is loaded when the first SMTP provider is created, not at start: an
 * idle server sends nothing (issue #9, idle memory).
 */
const nodemailer = lazyModule<typeof import('nodemailer')>('nodemailer');

/** `queued as <id>` in the final 250 reply (Postfix, Exim, Sendmail, most relays). */
const QUEUE_ID_REPLY = /queued as ([A-Za-z0-9._-]+)/i;

/**
 * The message id to store: the server's queue id from its final reply when it names one,
 * else the Message-ID the server says the delivered copy carries (Outlook, SES; nodemailer's
 * `serverMessageId`), else the Message-ID header that was sent.
 */
function pickProviderMessageId(info: {
  response?: string;
  serverMessageId?: string;
  messageId: string;
}): string {
  return info.response?.match(QUEUE_ID_REPLY)?.[1] ?? info.serverMessageId ?? info.messageId;
}

/**
 * nodemailer's `getSocket`: the socket comes from {@link connectOutbound}, connected to an address
 * the policy checked; nodemailer layers TLS on it with the configured host as certificate name.
 * nodemailer passes when its connection phase started, so connectionTimeout covers both.
 */
function outboundSocket(
  config: SmtpConfig,
  policy: OutboundPolicy,
  timeoutMs: number,
): SMTPPoolOptions['getSocket'] {
  return (socketOptions, callback) => {
    const startedAt = (socketOptions as { connectStartedAt?: number }).connectStartedAt;
    connectOutbound(config.host, config.port, policy, {
      timeoutMs,
      ...(startedAt ? { startedAt } : {}),
    }).then(
      (connection) => callback(null, { connection }),
      (error: Error) => callback(error),
    );
  };
}

/** Options of {@link createSmtpProvider} that are not part of the adapter's config. */
export interface SmtpProviderOptions {
  /** Verify the server certificate (default true); only code (tests) turns it off. */
  rejectUnauthorized?: boolean;
  /**
   * CA certificates (PEM) to trust instead of Node's bundled ones; only code (tests with a
   * self-signed CA) sets it. Operators add a private CA with NODE_EXTRA_CA_CERTS.
   */
  ca?: string | Buffer;
  /** Which addresses may be reached (default: public only; `SMTP_ALLOW_PRIVATE` widens it). */
  outbound?: OutboundPolicy;
  /** Shorter timeouts than {@link SMTP_TIMEOUTS_MS}, in ms; for tests that wait for one to fire. */
  timeouts?: Partial<Record<keyof typeof SMTP_TIMEOUTS_MS, number>>;
  /**
   * Pooled connections, i.e. messages in transit at once (default 5, nodemailer's); further sends
   * wait in the pool's queue.
   */
  maxConnections?: number;
}

/**
 * Creates a provider that sends through an SMTP server.
 * - One connection pool (`maxMessages: Infinity`: connections are reused for any number of
 *   messages, which roughly doubles throughput; ARCHITECTURE.md "Known traps").
 * - Every connection goes through the outbound policy ({@link connectOutbound}, nodemailer's
 *   `getSocket`): the host is resolved and each address checked before the socket opens, and
 *   nodemailer gets that socket, so it never resolves the name itself. TLS (implicit or
 *   STARTTLS) still verifies the certificate against the configured host name.
 * - `secure` (implicit TLS from the first byte) defaults to true only for port 465. Otherwise,
 *   with `tls: "auto"` (default): STARTTLS is required when credentials are set (nodemailer
 *   `requireTLS`, issue #8: a stripped STARTTLS must not expose AUTH), and opportunistic without
 *   credentials (an unencrypted session continues, `opportunisticTLS`). `tls: "none"` never
 *   upgrades (`ignoreTLS`).
 * - Certificates are verified (`tls.rejectUnauthorized: true`) unless `rejectUnauthorized` is false.
 * - Timeouts per {@link SMTP_TIMEOUTS_MS}.
 * - Each message is composed by {@link composeMessage} (one string build, no streams) and handed
 *   to nodemailer as `raw` bytes with its envelope (to + cc + bcc): nodemailer only runs the SMTP
 *   dialogue. Its own MailComposer cost about as much CPU per message as the rest of the worker's
 *   send path together (README "Performance").
 * `send` throws {@link ProviderError} classified by {@link classifySmtpError}. When the server
 * accepts some recipients and refuses others, the message goes to the accepted ones and `send`
 * resolves (a retry would duplicate it for them) with the refused ones in `refused`; only a
 * refusal of every recipient throws.
 * A send given up through `options.signal` throws a transient ProviderError (EABORT) when the
 * message was not fully transmitted yet, else one with `ambiguous` set (see smtp-transmission.ts);
 * so does a connection lost after the message was transmitted without a reply to it.
 */
export function createSmtpProvider(config: SmtpConfig, options: SmtpProviderOptions = {}): EmailProvider {
  const secure = config.secure ?? config.port === 465;
  const auth =
    config.username !== undefined && config.username !== ''
      ? { user: config.username, pass: config.password ?? '' }
      : undefined;
  const policy = options.outbound ?? DEFAULT_OUTBOUND_POLICY;
  const target = { host: config.host, port: config.port };
  const plaintextOnly = config.tls === 'none';
  const timeouts = { ...SMTP_TIMEOUTS_MS, ...options.timeouts };
  const transporter = nodemailer().createTransport({
    pool: true,
    maxConnections: options.maxConnections ?? 5,
    maxMessages: Number.POSITIVE_INFINITY,
    host: config.host,
    port: config.port,
    secure,
    ...(plaintextOnly ? { ignoreTLS: true } : auth ? { requireTLS: true } : { opportunisticTLS: !secure }),
    tls: {
      rejectUnauthorized: options.rejectUnauthorized ?? true,
      ...(options.ca ? { ca: options.ca } : {}),
    },
    ...(auth ? { auth } : {}),
    connectionTimeout: timeouts.connection,
    greetingTimeout: timeouts.greeting,
    socketTimeout: timeouts.socket,
    getSocket: outboundSocket(config, policy, timeouts.connection),
  });
  transporter.use('stream', markTransmission as never);
  let closed = false;

  return {
    async send(email: OutgoingEmail, sendOptions: SendOptions = {}): Promise<SendResult> {
      if (closed) throw new ProviderError('SMTP provider is closed', { permanent: false });
      const mark: TransmissionMark = { transmitted: false };
      try {
        // Composed here once (mime-compose.ts, about a third of nodemailer's CPU per message);
        // nodemailer only runs the SMTP dialogue. Bcc is in the envelope only.
        const message = composeMessage(email);
        const info = await transporter.sendMail({
          ...transmissionOption(mark),
          ...(sendOptions.signal ? { signal: sendOptions.signal } : {}),
          envelope: message.envelope,
          raw: message.raw,
          messageId: message.messageId,
        });
        // Issue #11: recipients refused while others were accepted are reported, not thrown.
        const refused = refusedRecipientsOf((info as { rejectedErrors?: unknown }).rejectedErrors);
        return { providerMessageId: pickProviderMessageId(info), ...(refused.length ? { refused } : {}) };
      } catch (error) {
        if (sendOptions.signal?.aborted) throw abortedSendError(sendOptions.signal, mark, error);
        // The whole message went out and no reply to it came (the connection closed, reset or
        // timed out): the server may have taken it, as when the deadline passes there. Retried,
        // it was delivered twice (review finding, session 15). A reply (4xx/5xx) is an answer.
        if (mark.transmitted && !hasSmtpReply(error)) throw unansweredSendError(error);
        throw classifySmtpError(error, target);
      }
    },

    async verify() {
      try {
        await transporter.verify();
        return {
          success: true,
          message: `Connected to ${config.host}:${config.port}${auth ? ' and authenticated' : ''}`,
        };
      } catch (error) {
        return { success: false, message: classifySmtpError(error, target).message };
      }
    },

    async close() {
      closed = true;
      transporter.close();
    },
  };
}

/** Whether a nodemailer error carries the server's reply code (an answer, not a lost connection). */
function hasSmtpReply(error: unknown): boolean {
  return typeof (error as { responseCode?: unknown } | null)?.responseCode === 'number';
}

/** The error of a send whose connection failed after the message was transmitted, before any reply. */
function unansweredSendError(cause: unknown): ProviderError {
  const code = (cause as { code?: unknown } | null)?.code;
  return new ProviderError(
    'SMTP connection lost after the message was transmitted, before the server confirmed it: it may have been delivered',
    {
      permanent: false,
      ambiguous: true,
      providerCode: typeof code === 'string' ? code : 'ECONNECTION',
      cause,
    },
  );
}

/**
 * The error of a send given up through its signal: transient when the message was not fully
 * transmitted (the server cannot have accepted it), else `ambiguous` (it may have).
 */
function abortedSendError(signal: AbortSignal, mark: TransmissionMark, cause: unknown): ProviderError {
  const reason = signal.reason instanceof Error ? signal.reason.message : String(signal.reason);
  if (mark.transmitted) {
    return new ProviderError(
      `SMTP send given up (${reason}) after the message was transmitted, before the server confirmed it: it may have been delivered`,
      { permanent: false, ambiguous: true, providerCode: 'EABORT', cause },
    );
  }
  return new ProviderError(`SMTP send given up (${reason}) before the message was transmitted`, {
    permanent: false,
    providerCode: 'EABORT',
    cause,
  });
}

/** The `smtp` adapter type behind the provider contract (definition.ts). */
export const smtpProvider = {
  type: 'smtp',
  name: 'SMTP',
  description: 'Any SMTP server or relay (your own mail server or a provider’s SMTP endpoint).',
  configSchema: smtpConfigSchema,
  fields: {
    host: { label: 'Host', type: 'text', placeholder: 'smtp.example.com' },
    port: { label: 'Port', type: 'number', placeholder: '587 (STARTTLS), 465 (TLS) or 25' },
    secure: { label: 'Use TLS from the start', type: 'boolean', placeholder: 'On for port 465' },
    username: { label: 'Username', type: 'text', placeholder: 'Optional' },
    password: { label: 'Password', type: 'password', placeholder: 'Optional' },
    tls: {
      label: 'TLS',
      type: 'select',
      placeholder: 'auto (STARTTLS; required with credentials); none only for lab servers',
    },
  },
  classifyError: (error) =>
    error instanceof ProviderError ? error : new ProviderError(String(error), { permanent: false }),
  create: (config, context) =>
    createSmtpProvider(config, { outbound: context.outbound, maxConnections: context.maxConnections }),
} satisfies ProviderDefinition<'smtp', typeof smtpConfigSchema>;
