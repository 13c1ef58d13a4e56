import { createTransport } from 'nodemailer';
import type { SmtpConfig } from '../modules/adapters/adapter-types.ts';
import { markTransmission, type TransmissionMark, transmissionOption } from './smtp-transmission.ts';
import {
  type EmailProvider,
  type OutgoingEmail,
  ProviderError,
  type SendOptions,
  type SendResult,
} from './types.ts';

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

/** nodemailer error codes for which retrying the same message cannot help. */
const PERMANENT_CODES = new Set([
  'EAUTH', // credentials rejected (535) or no mechanism both sides support
  'ENOAUTH', // server requires credentials the adapter lacks
  'ECONFIG',
  'EENVELOPE', // without a reply code: no recipients or an unusable address
  'EMAXRECIPIENTS',
  'EREQUIRETLS',
]);

/** nodemailer's error properties (see its `NodemailerError`). */
interface SmtpErrorLike {
  message?: string;
  code?: string;
  responseCode?: number;
  response?: string;
  originalCode?: string;
}

/**
 * Maps a nodemailer error to a {@link ProviderError}.
 * Rule (RFC 5321, 4.2.1): a 5yz reply is a permanent negative completion, a 4yz reply a
 * transient one. Authentication failures (EAUTH, ENOAUTH) are permanent unless the reply is
 * 4yz (RFC 4954's 454). Without a reply code, ECONFIG and envelope errors are
 * permanent; network failures (ECONNECTION, ETIMEDOUT, ESOCKET, ECONNREFUSED, EDNS, ETLS) and
 * anything unknown are transient, since retries are bounded by the queue.
 * `providerCode` is the reply code when there is one, else the nodemailer code.
 */
export function classifySmtpError(error: unknown): ProviderError {
  const err = (typeof error === 'object' && error !== null ? error : {}) as SmtpErrorLike;
  const code = err.code;
  const replyCode = typeof err.responseCode === 'number' ? err.responseCode : undefined;
  const detail = err.response ?? err.message ?? String(error);
  if (code === 'EAUTH' || code === 'ENOAUTH') {
    // 454 "Temporary authentication failure" (RFC 4954, 6) is worth a retry; 535 and the rest are not.
    const temporary = replyCode !== undefined && replyCode >= 400 && replyCode < 500;
    return new ProviderError(`SMTP authentication failed: ${detail}`, {
      permanent: !temporary,
      providerCode: code,
      cause: error,
    });
  }
  if (replyCode !== undefined && replyCode >= 400 && replyCode < 600) {
    const permanent = replyCode >= 500;
    return new ProviderError(
      `SMTP server rejected the message (${permanent ? 'permanent' : 'transient'}): ${detail}`,
      {
        permanent,
        providerCode: String(replyCode),
        cause: error,
      },
    );
  }
  const permanent = code !== undefined && PERMANENT_CODES.has(code);
  const label = code === 'ESOCKET' && err.originalCode ? `${code}/${err.originalCode}` : code;
  return new ProviderError(`SMTP send failed: ${err.message ?? detail}`, {
    permanent,
    ...(label ? { providerCode: label } : {}),
    cause: error,
  });
}

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
 * Creates a provider that sends through an SMTP server.
 * - One connection pool (`maxMessages: Infinity`: connections are reused for any number of
 *   messages, which roughly doubles throughput; ARCHITECTURE.md "Known traps").
 * - `secure` (implicit TLS from the first byte) defaults to true only for port 465; otherwise
 *   STARTTLS is used when the server offers it, and if the server refuses the upgrade the
 *   session continues unencrypted without sending credentials (nodemailer `opportunisticTLS`).
 * - Certificates are verified (`tls.rejectUnauthorized: true`) unless `rejectUnauthorized` is false.
 * - Timeouts per {@link SMTP_TIMEOUTS_MS}.
 * `send` throws {@link ProviderError} classified by {@link classifySmtpError}. When the server
 * accepts some recipients and refuses others, the message goes to the accepted ones and `send`
 * resolves (a retry would duplicate it for them); only a refusal of every recipient throws.
 * A send given up through `options.signal` throws a transient ProviderError (EABORT) when the
 * message was not fully transmitted yet, else one with `ambiguous` set (see smtp-transmission.ts).
 * @param options.rejectUnauthorized verify the server certificate (default true); not part of
 *   the spec's `smtp` config, so only code (tests, a future setting) can turn it off.
 * @param options.maxConnections pooled connections, i.e. messages in transit at once (default 5,
 *   nodemailer's); further sends wait in the pool's queue.
 */
export function createSmtpProvider(
  config: SmtpConfig,
  options: { rejectUnauthorized?: boolean; maxConnections?: number } = {},
): EmailProvider {
  const secure = config.secure ?? config.port === 465;
  const auth =
    config.username !== undefined && config.username !== ''
      ? { user: config.username, pass: config.password ?? '' }
      : undefined;
  const transporter = createTransport({
    pool: true,
    maxConnections: options.maxConnections ?? 5,
    maxMessages: Number.POSITIVE_INFINITY,
    host: config.host,
    port: config.port,
    secure,
    opportunisticTLS: !secure,
    tls: { rejectUnauthorized: options.rejectUnauthorized ?? true },
    ...(auth ? { auth } : {}),
    connectionTimeout: SMTP_TIMEOUTS_MS.connection,
    greetingTimeout: SMTP_TIMEOUTS_MS.greeting,
    socketTimeout: SMTP_TIMEOUTS_MS.socket,
  });
  transporter.use('stream', markTransmission as never);
  let closed = false;

  return {
    async send(email: OutgoingEmail, sendOptions: SendOptions = {}): Promise<SendResult> {
      if (closed) throw new ProviderError('SMTP provider is closed', { permanent: false });
      const mark: TransmissionMark = { transmitted: false };
      try {
        const info = await transporter.sendMail({
          ...transmissionOption(mark),
          ...(sendOptions.signal ? { signal: sendOptions.signal } : {}),
          from: email.from,
          to: email.to,
          subject: email.subject,
          html: email.html,
          text: email.text,
          ...(email.headers ? { headers: email.headers } : {}),
          ...(email.messageId ? { messageId: email.messageId } : {}),
          ...(email.attachments
            ? {
                attachments: email.attachments.map((a) => ({
                  filename: a.filename,
                  content: a.content,
                  contentType: a.contentType,
                })),
              }
            : {}),
        });
        return { providerMessageId: pickProviderMessageId(info) };
      } catch (error) {
        if (sendOptions.signal?.aborted) throw abortedSendError(sendOptions.signal, mark, error);
        throw classifySmtpError(error);
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
        return { success: false, message: classifySmtpError(error).message };
      }
    },

    async close() {
      closed = true;
      transporter.close();
    },
  };
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
