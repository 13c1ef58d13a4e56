import type { Readable } from 'node:stream';

/**
 * Tells, for one SMTP send, whether the whole message was handed to the connection.
 *
 * Why it matters: an SMTP server takes responsibility for a message only when it answers the
 * end of the DATA section (the lone "." line) with 250 (RFC 5321, 4.1.1.4 and 6.1). A send cut off
 * before the message was fully transmitted cannot have been accepted, so retrying it is safe; one
 * cut off after it, while waiting for that reply, may have been accepted (RFC 1047 describes the
 * duplicates this causes), so retrying could deliver it twice.
 */
export interface TransmissionMark {
  /** True once the message's last byte went to the connection (the final reply may still be due). */
  transmitted: boolean;
}

/** The key under which a send's {@link TransmissionMark} travels in nodemailer's mail data. */
const MARK_KEY = 'postwrightTransmission';

/** nodemailer's plugin view of a message (its own types lag behind its runtime). */
interface PluginMail {
  data: Record<string, unknown>;
  message: { processFunc(process: (input: Readable) => Readable): void };
}

/** The nodemailer options that carry `mark` for {@link markTransmission}. */
export function transmissionOption(mark: TransmissionMark): Record<string, TransmissionMark> {
  return { [MARK_KEY]: mark };
}

/**
 * A nodemailer `stream` plugin (https://nodemailer.com/plugins/): sets the send's
 * {@link TransmissionMark} when the message stream the connection reads ends, i.e. when the
 * connection has read its last byte ('end' fires only once every byte was consumed). nodemailer
 * reads the message only after the server answered DATA with 354 (earlier stages buffer ahead, so
 * the mark must sit on the stream the connection reads: the last stage, which this process function
 * returns unchanged; no extra stream per message). The stream is made per read, so a message
 * nodemailer re-sends over a fresh pooled connection is tracked afresh.
 */
export function markTransmission(mail: PluginMail, done: (error?: Error | null) => void): void {
  const mark = mail.data[MARK_KEY] as TransmissionMark | undefined;
  if (mark) {
    mail.message.processFunc((input) => {
      input.once('end', () => {
        mark.transmitted = true;
      });
      return input;
    });
  }
  done();
}
