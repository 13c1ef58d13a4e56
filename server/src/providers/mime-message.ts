import type Mail from 'nodemailer/lib/mailer';
import type { OutgoingEmail } from './types.ts';

/**
 * The nodemailer message options of `email` (https://nodemailer.com/message/): sender, `to`, `cc`,
 * Reply-To, subject, HTML and text parts, extra headers, Message-ID and attachments. Bcc is left
 * out: SMTP puts it in the envelope (the caller adds it), a raw MIME message for an HTTP API must
 * not carry it as a header. The SES provider builds its raw MIME message from these with
 * nodemailer's MailComposer; the SMTP provider composes its own (mime-compose.ts, whose tests
 * compare the two).
 */
export function mimeMessageOptions(email: OutgoingEmail): Mail.Options {
  return {
    from: email.from,
    to: email.to,
    ...(email.cc?.length ? { cc: email.cc } : {}),
    ...(email.replyTo?.length ? { replyTo: email.replyTo } : {}),
    subject: email.subject,
    html: email.html,
    text: email.text,
    ...(email.headers ? { headers: email.headers } : {}),
    ...(email.messageId ? { messageId: email.messageId } : {}),
    ...(email.attachments?.length
      ? {
          attachments: email.attachments.map((a) => ({
            filename: a.filename,
            content: a.content,
            contentType: a.contentType,
          })),
        }
      : {}),
  };
}
