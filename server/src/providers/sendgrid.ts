import type { Client as SendGridClient } from '@sendgrid/client';
import type { MailDataRequired, MailService as SendGridMailService } from '@sendgrid/mail';
import addressparser from 'nodemailer/lib/addressparser';
import { z } from 'zod';
import type { ProviderDefinition } from './definition.ts';
import {
  base64,
  classifyHttpFailure,
  errorMessage,
  httpTransportFor,
  sendUnderSignal,
} from './http-transport.ts';
import { lazyModule } from './lazy-module.ts';
import { fittedLabels, SENDGRID_CATEGORIES, sendgridCustomArgs } from './provider-tags.ts';
import { type EmailProvider, hasTags, isTagList, type OutgoingEmail, ProviderError } from './types.ts';

/** nodemailer's RFC 2047 encoder, loaded with the first name that needs it (idle memory, issue #9). */
const mimeFuncs = lazyModule<typeof import('nodemailer/lib/mime-funcs')>('nodemailer/lib/mime-funcs');
const sendgridClient = lazyModule<{ Client: typeof SendGridClient }>('@sendgrid/client');
const sendgridMail = lazyModule<{ MailService: typeof SendGridMailService }>('@sendgrid/mail');

/**
 * `mailapi_b` = SendGrid (https://www.twilio.com/docs/sendgrid/api-reference/mail-send/mail-send),
 * through the official `@sendgrid/mail` SDK. Send: `POST /v3/mail/send` (JSON, `Authorization:
 * Bearer <apiKey>`), answered 202 with the message id in the `X-Message-Id` header. Verify:
 * `GET /v3/scopes`. Errors are JSON `{errors: [{message, field, help}]}`.
 */

// webhookPublicKey (issue #11): the Event Webhook's ECDSA verification key (base64 DER, as SendGrid
// shows it); optional (without it the eventsUrl token alone authenticates the events).
const configSchema = z.strictObject({
  apiKey: z.string().min(1),
  webhookPublicKey: z.string().min(1).optional(),
});

/** The SDK's ResponseError: `code` is the HTTP status, `response.body` the parsed error body. */
interface SendGridResponseError {
  code: number;
  message: string;
  response?: { body?: unknown };
}

function isResponseError(error: unknown): error is SendGridResponseError {
  return (
    error instanceof Error &&
    typeof (error as { code?: unknown }).code === 'number' &&
    'response' in (error as object)
  );
}

/** The messages of a SendGrid error body `{errors: [{message}]}`, joined; undefined when absent. */
function bodyMessage(body: unknown): string | undefined {
  const errors = (body as { errors?: { message?: unknown }[] } | undefined)?.errors;
  if (!Array.isArray(errors)) return undefined;
  const messages = errors
    .map((e) => e?.message)
    .filter((m): m is string => typeof m === 'string' && m !== '');
  return messages.length ? messages.join('; ') : undefined;
}

function classifyError(error: unknown): ProviderError {
  if (error instanceof ProviderError) return error;
  if (isResponseError(error)) {
    return classifyHttpFailure({
      status: error.code,
      message: bodyMessage(error.response?.body) ?? error.message,
      cause: error,
    });
  }
  // axios without a response: a network error (ECONNREFUSED, ETIMEDOUT, EOUTBOUND from our lookup).
  const code = (error as { code?: unknown } | undefined)?.code;
  return classifyHttpFailure({
    message: errorMessage(error),
    code: typeof code === 'string' ? code : undefined,
    cause: error,
  });
}

/**
 * SendGrid's email object of one mailbox (its helper would keep the quotes of a quoted name). A name
 * holding `,` or `;` goes as an RFC 2047 encoded word: SendGrid documents that to/cc/bcc names
 * cannot hold them (it writes the name into the header unquoted, where `"Doe, John"` reads as two
 * mailboxes: the email is dropped or goes elsewhere after a 202; review finding, session 16).
 */
function mailbox(address: string): { email: string; name?: string } {
  const [parsed] = addressparser(address, { flatten: true });
  if (!parsed?.address) return { email: address };
  if (!parsed.name) return { email: parsed.address };
  return {
    email: parsed.address,
    name: /[,;]/.test(parsed.name) ? mimeFuncs().encodeWord(parsed.name, 'Q', 0) : parsed.name,
  };
}

/**
 * `addresses` as SendGrid mailboxes without any address already in `seen` (compared lower-cased;
 * each is added): SendGrid refuses a personalization that names one address twice across to, cc
 * and bcc (400 "Each email address in the personalization block should be unique"), which every
 * other provider delivers once (review finding, session 16).
 */
function uniqueMailboxes(
  addresses: readonly string[],
  seen: Set<string>,
): { email: string; name?: string }[] {
  const out: { email: string; name?: string }[] = [];
  for (const address of addresses) {
    const box = mailbox(address);
    const key = box.email.toLowerCase();
    if (seen.has(key)) continue;
    seen.add(key);
    out.push(box);
  }
  return out;
}

/** The SendGrid mail body of `email`: one personalization with every to, cc and bcc. */
function toSendGrid(email: OutgoingEmail): MailDataRequired {
  const headers = { ...email.headers, ...(email.messageId ? { 'Message-ID': email.messageId } : {}) };
  const recipients = new Set<string>();
  const to = uniqueMailboxes(email.to, recipients);
  const cc = uniqueMailboxes(email.cc ?? [], recipients);
  const bcc = uniqueMailboxes(email.bcc ?? [], recipients);
  // reply_to_list must be unique too.
  const replyTo = uniqueMailboxes(email.replyTo ?? [], new Set());
  return {
    from: mailbox(email.from),
    to,
    subject: email.subject,
    html: email.html,
    text: email.text,
    ...(cc.length ? { cc } : {}),
    ...(bcc.length ? { bcc } : {}),
    // reply_to takes one address; several go in reply_to_list (which excludes reply_to).
    ...(replyTo.length > 1 ? { replyToList: replyTo } : replyTo.length === 1 ? { replyTo: replyTo[0] } : {}),
    ...(Object.keys(headers).length ? { headers } : {}),
    ...(email.attachments?.length
      ? {
          attachments: email.attachments.map((a) => ({
            content: base64(a.content),
            filename: a.filename,
            type: a.contentType,
            disposition: 'attachment',
          })),
        }
      : {}),
    // Labels as categories, labels name → value as custom_args.
    ...(hasTags(email.tags)
      ? isTagList(email.tags)
        ? { categories: fittedLabels(email.tags, SENDGRID_CATEGORIES) }
        : { customArgs: sendgridCustomArgs(email.tags) }
      : {}),
  } as MailDataRequired;
}

/** The header value as a string (axios headers may be arrays). */
function headerValue(headers: Record<string, unknown> | undefined, name: string): string | undefined {
  const value = headers?.[name];
  return Array.isArray(value) ? String(value[0]) : typeof value === 'string' ? value : undefined;
}

export const sendgridProvider = {
  type: 'mailapi_b',
  name: 'SendGrid',
  description: 'SendGrid (Twilio): hosted email sending API, authenticated with an API key.',
  configSchema,
  fields: {
    apiKey: { label: 'API key', type: 'password', placeholder: 'SG....' },
    webhookPublicKey: {
      label: 'Event Webhook verification key',
      type: 'password',
      placeholder: 'MFkwEwYHKoZIzj0CAQYIKoZIzj0DAQcDQgAE...',
    },
  },
  endpointVariable: 'PROVIDER_ENDPOINT_SENDGRID',
  // Mail Send v3: "The total size of your email, including attachments, must be less than 30MB".
  maxMessageBytes: 30_000_000,
  classifyError,
  create(config, context): EmailProvider {
    const transport = httpTransportFor('https://api.sendgrid.com', context);
    const { Client } = sendgridClient();
    const client = new Client();
    // setApiKey warns on the console for a key without the SG. prefix; set the header ourselves.
    client.setDefaultHeader('Authorization', `Bearer ${config.apiKey}`);
    client.setDefaultRequest({
      baseUrl: `${transport.baseUrl}/`,
      httpAgent: transport.httpAgent,
      httpsAgent: transport.httpsAgent,
      // axios: ms; none by default (a request given up at the deadline held its slot).
      timeout: context.requestTimeoutMs,
    } as never);
    const { MailService } = sendgridMail();
    const mail = new MailService();
    mail.setClient(client);
    return {
      send: (email, options = {}) =>
        sendUnderSignal(
          'SendGrid',
          options.signal,
          async () => {
            const [response] = await mail.send(toSendGrid(email));
            const id = headerValue(response.headers as Record<string, unknown>, 'x-message-id');
            if (!id) throw classifyHttpFailure({ message: 'SendGrid answered without X-Message-Id' });
            return { providerMessageId: id };
          },
          classifyError,
        ),
      async verify() {
        try {
          await client.request({ method: 'GET', url: '/v3/scopes' });
          return { success: true, message: 'Authenticated with SendGrid' };
        } catch (error) {
          return { success: false, message: classifyError(error).message };
        }
      },
      close: () => transport.close(),
    };
  },
} satisfies ProviderDefinition<'mailapi_b', typeof configSchema>;
