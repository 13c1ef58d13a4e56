import { ProviderError, type RefusedRecipient } from './types.ts';

/**
 * What an SMTP failure tells the user (adapter test endpoint, an email's `errorMessage`): a fixed
 * sentence of ours per kind of failure (refused, timed out, TLS, authentication, not SMTP, reply
 * code), never the remote server's bytes. Echoing them made `POST /api/adapters/:id/test` a banner
 * grabber for whatever listened on the port (issue #8: an SSH banner came back verbatim). The
 * original error stays on `cause` for operators' logs.
 */

/** nodemailer codes for which retrying the same message cannot help. */
const PERMANENT_CODES = new Set([
  'EAUTH', // credentials rejected (535) or no mechanism both sides support
  'ENOAUTH', // server requires credentials the adapter lacks
  'ECONFIG',
  'EENVELOPE', // without a reply code: no recipients or an unusable address
  'EMAXRECIPIENTS',
  'EREQUIRETLS',
  'EOUTBOUND', // refused by the outbound policy: the configuration must change
]);

/** Standard reply texts: RFC 5321 4.2.2-4.2.3, RFC 4954 6 (AUTH), RFC 7504 (521, 556). */
const REPLY_PHRASES: Record<number, string> = {
  421: 'service not available, closing transmission channel',
  450: 'mailbox unavailable',
  451: 'local error in processing',
  452: 'insufficient system storage',
  454: 'temporary authentication failure or TLS not available',
  455: 'server unable to accommodate parameters',
  500: 'command unrecognized',
  501: 'syntax error in parameters or arguments',
  502: 'command not implemented',
  503: 'bad sequence of commands',
  504: 'command parameter not implemented',
  521: 'server does not accept mail',
  530: 'authentication required',
  534: 'authentication mechanism is too weak',
  535: 'authentication credentials invalid',
  538: 'encryption required for the authentication mechanism',
  550: 'mailbox unavailable',
  551: 'user not local',
  552: 'exceeded storage allocation',
  553: 'mailbox name not allowed',
  554: 'transaction failed',
  555: 'MAIL FROM/RCPT TO parameters not recognized',
  556: 'domain does not accept mail',
};

/** An RFC 3463 enhanced status code at the start of a reply, e.g. `550 5.1.1 ...`. */
const ENHANCED_STATUS = /^\d{3}[ -]([245]\.\d{1,3}\.\d{1,3})(?:\s|$)/;

/** The commands of a mail transaction (nodemailer's `err.command`): a reply to them is about the message. */
const MESSAGE_COMMANDS = /^(MAIL|RCPT|DATA)\b/;

/** Node's TLS certificate error codes that mean "not trusted" (tls.TLSSocket#authorizationError). */
const CERTIFICATE_CODE = /CERT|SELF_SIGNED|UNABLE_TO_VERIFY|UNABLE_TO_GET_ISSUER|ALTNAME/;

/** nodemailer's error properties (its `NodemailerError`) and Node's system-error ones. */
interface SmtpErrorLike {
  code?: string;
  originalCode?: string;
  responseCode?: number;
  response?: string;
  command?: string;
  timeoutType?: string;
  errors?: { code?: string }[];
}

/** The server an error happened with, as configured (the user's own input, safe to repeat). */
export interface SmtpTarget {
  host: string;
  port: number;
}

/** `550 5.1.1 mailbox unavailable`: the reply code, its enhanced status code, our phrase. */
function describeReply(replyCode: number, response: string | undefined): string {
  const enhanced = response?.match(ENHANCED_STATUS)?.[1];
  const phrase = REPLY_PHRASES[replyCode] ?? (replyCode >= 500 ? 'permanent failure' : 'transient failure');
  return [String(replyCode), enhanced, phrase].filter(Boolean).join(' ');
}

/** The system error code behind a nodemailer wrapper (ESOCKET/ECONNREFUSED) or a Node AggregateError. */
function systemCode(err: SmtpErrorLike): string | undefined {
  return err.originalCode ?? err.errors?.find((e) => e.code)?.code ?? err.code;
}

/**
 * One fixed sentence for a failure that has no SMTP reply code: what failed, never what the server
 * sent. `message` is used only for our own policy refusal (EOUTBOUND), whose text is ours.
 */
function describeFailure(err: SmtpErrorLike & { message?: string }, target: SmtpTarget): string {
  const where = `${target.host}:${target.port}`;
  const code = err.code;
  const system = systemCode(err);
  if (code === 'EOUTBOUND') return err.message ?? `Refused to connect to ${where}`;
  if (system === 'ENOTFOUND' || system === 'EAI_AGAIN' || code === 'EDNS')
    return `Could not resolve ${target.host}`;
  if (system === 'ECONNREFUSED') return `Connection refused by ${where}`;
  if (system === 'EHOSTUNREACH' || system === 'ENETUNREACH') return `No route to ${where}`;
  if (code === 'ETIMEDOUT' || system === 'ETIMEDOUT') {
    if (err.timeoutType === 'UPGRADE_TIMEOUT') return `TLS handshake with ${where} timed out`;
    if (err.timeoutType === 'SOCKET_TIMEOUT') return `The SMTP server at ${where} stopped responding`;
    // One sentence for a port that never answers (filtered) and one that accepts but stays silent:
    // telling them apart would map firewalls for whoever configures an adapter.
    return `Timed out waiting for the SMTP server at ${where}`;
  }
  if (code === 'ETLS' || (system && CERTIFICATE_CODE.test(system)) || system?.startsWith('ERR_SSL')) {
    if (err.command === 'STARTTLS' && err.responseCode)
      return `${where} refused STARTTLS; credentials are only sent over TLS (set "tls": "none" to allow plaintext on a lab server)`;
    if (system && CERTIFICATE_CODE.test(system))
      return `TLS with ${where} failed: the server's certificate is not trusted (${system})`;
    return `TLS with ${where} failed`;
  }
  if (code === 'EPROTOCOL' && err.command === 'CONN') return `${where} did not answer as an SMTP server`;
  if (code === 'EPROTOCOL') return `The SMTP server at ${where} sent an invalid response`;
  if (code === 'ENOAUTH') return `The SMTP server at ${where} requires credentials`;
  if (code === 'EAUTH') return `SMTP authentication failed at ${where}`;
  if (code === 'ECONNECTION' || system === 'ECONNRESET' || system === 'EPIPE')
    return `The SMTP server at ${where} closed the connection unexpectedly`;
  if (code === 'EENVELOPE') return 'The message has no usable sender or recipient';
  return `SMTP send through ${where} failed${code ? ` (${code})` : ''}`;
}

/**
 * Maps a nodemailer or socket error to a {@link ProviderError} whose message is ours (see above).
 * Rule (RFC 5321, 4.2.1): a 5yz reply is a permanent negative completion, a 4yz reply a
 * transient one. Authentication failures (EAUTH, ENOAUTH) are permanent unless the reply is
 * 4yz (RFC 4954's 454). Without a reply code, ECONFIG, envelope errors and outbound-policy
 * refusals (EOUTBOUND) are permanent; network failures (ECONNECTION, ETIMEDOUT, ESOCKET,
 * ECONNREFUSED, EDNS, ETLS) and anything unknown are transient, since retries are bounded by the queue.
 * `providerCode` is the reply code when there is one, else the nodemailer code (`ESOCKET/ECONNREFUSED`
 * when nodemailer wraps a system error).
 * @param target the configured host and port, named in the message.
 */
export function classifySmtpError(error: unknown, target: SmtpTarget): ProviderError {
  const err = (typeof error === 'object' && error !== null ? error : {}) as SmtpErrorLike & {
    message?: string;
  };
  const code = err.code;
  const replyCode =
    typeof err.responseCode === 'number' && err.responseCode >= 400 && err.responseCode < 600
      ? err.responseCode
      : undefined;
  if (code === 'EAUTH' || code === 'ENOAUTH') {
    // 454 "Temporary authentication failure" (RFC 4954, 6) is worth a retry; 535 and the rest are not.
    const temporary = replyCode !== undefined && replyCode < 500;
    const reply = replyCode ? `: ${describeReply(replyCode, err.response)}` : '';
    return new ProviderError(`${describeFailure(err, target)}${reply}`, {
      permanent: !temporary,
      providerCode: code,
      cause: error,
    });
  }
  if (replyCode !== undefined && code !== 'ETLS') {
    const permanent = replyCode >= 500;
    const kind = permanent ? 'permanent' : 'transient';
    const reply = describeReply(replyCode, err.response);
    const message = MESSAGE_COMMANDS.test(err.command ?? '')
      ? `SMTP server rejected the message (${kind}): ${reply}`
      : `The SMTP server at ${target.host}:${target.port} refused the session (${kind}): ${reply}`;
    return new ProviderError(message, { permanent, providerCode: String(replyCode), cause: error });
  }
  // A refused STARTTLS with credentials set (requireTLS) stays refused until the config changes.
  const starttlsRefused = code === 'ETLS' && replyCode !== undefined && replyCode >= 500;
  const permanent = starttlsRefused || (code !== undefined && PERMANENT_CODES.has(code));
  const label = code === 'ESOCKET' && err.originalCode ? `${code}/${err.originalCode}` : code;
  return new ProviderError(describeFailure(err, target), {
    permanent,
    ...(label ? { providerCode: label } : {}),
    cause: error,
  });
}

/**
 * The recipients an SMTP server refused at RCPT while accepting others (nodemailer's
 * `info.rejectedErrors`, each with `recipient`, `responseCode` and `response`; issue #11): 5xx is
 * permanent (a hard bounce), anything else temporary (a soft bounce). The diagnostic is the reply
 * code, its enhanced status code and our phrase (`550 5.1.1 mailbox unavailable`), never the
 * server's own text (see the top of this file). Returns [] when there are none.
 */
export function refusedRecipientsOf(rejectedErrors: unknown): RefusedRecipient[] {
  if (!Array.isArray(rejectedErrors)) return [];
  return rejectedErrors.flatMap((item: SmtpErrorLike & { recipient?: unknown }) => {
    if (typeof item?.recipient !== 'string') return [];
    const replyCode = typeof item.responseCode === 'number' ? item.responseCode : undefined;
    return [
      {
        address: item.recipient,
        permanent: replyCode !== undefined && replyCode >= 500,
        diagnostic: replyCode ? describeReply(replyCode, item.response) : 'recipient refused',
      },
    ];
  });
}
