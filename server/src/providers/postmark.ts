import type { Message } from 'postmark';
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
import { forwardedMailbox } from './mailbox-address.ts';
import { fittedLabels, POSTMARK_TAG_MAX_LENGTH, postmarkMetadata } from './provider-tags.ts';
import { type EmailProvider, hasTags, isTagList, type OutgoingEmail, ProviderError } from './types.ts';

const postmarkSdk = lazyModule<typeof import('postmark')>('postmark');

/**
 * `mailapi_server` = Postmark (https://postmarkapp.com/developer/api/email-api), through the
 * official `postmark` SDK. Send: `POST /email` (JSON, `X-Postmark-Server-Token: <serverToken>`),
 * answered `{MessageID, ErrorCode: 0, Message: "OK"}`. Verify: `GET /server`. Errors are JSON
 * `{ErrorCode, Message}` (422 for a rejected request, 401 for a bad token).
 */

// Issue #11: how Postmark's webhooks authenticate to the eventsUrl, all optional (without them the
// URL's token alone authenticates): HTTP basic auth (credentials put in the webhook URL) and/or a
// custom header `X-Postmark-Webhook-Token: <webhookToken>` configured on the webhook.
const configSchema = z.strictObject({
  serverToken: z.string().min(1),
  webhookUsername: z.string().min(1).optional(),
  webhookPassword: z.string().min(1).optional(),
  webhookToken: z.string().min(1).optional(),
});

/** The SDK's PostmarkError: `statusCode` is the HTTP status (0 when no response came). */
interface PostmarkError {
  name: string;
  message: string;
  code: number;
  statusCode: number;
}

function isPostmarkError(error: unknown): error is PostmarkError {
  return error instanceof Error && typeof (error as { statusCode?: unknown }).statusCode === 'number';
}

function classifyError(error: unknown): ProviderError {
  if (error instanceof ProviderError) return error;
  if (isPostmarkError(error)) {
    return classifyHttpFailure({
      status: error.statusCode === 0 ? undefined : error.statusCode,
      message: error.message,
      ...(error.code ? { code: String(error.code) } : {}),
      cause: error,
    });
  }
  return classifyHttpFailure({ message: errorMessage(error), cause: error });
}

/** The Postmark message of `email` (addresses comma-separated, as the API takes them). */
function toPostmark(email: OutgoingEmail): Message {
  const headers = { ...email.headers, ...(email.messageId ? { 'Message-ID': email.messageId } : {}) };
  return {
    From: forwardedMailbox(email.from),
    To: email.to.map(forwardedMailbox).join(', '),
    ...(email.cc?.length ? { Cc: email.cc.map(forwardedMailbox).join(', ') } : {}),
    ...(email.bcc?.length ? { Bcc: email.bcc.map(forwardedMailbox).join(', ') } : {}),
    ...(email.replyTo?.length ? { ReplyTo: email.replyTo.map(forwardedMailbox).join(', ') } : {}),
    Subject: email.subject,
    HtmlBody: email.html,
    TextBody: email.text,
    ...(Object.keys(headers).length
      ? { Headers: Object.entries(headers).map(([Name, Value]) => ({ Name, Value })) }
      : {}),
    ...(email.attachments?.length
      ? {
          Attachments: email.attachments.map((a) => ({
            Name: a.filename,
            Content: base64(a.content),
            ContentType: a.contentType,
            ContentID: null,
          })),
        }
      : {}),
    // A label as Tag (Postmark takes one), labels name → value as Metadata.
    ...(hasTags(email.tags)
      ? isTagList(email.tags)
        ? { Tag: fittedLabels(email.tags, { max: 1, maxLength: POSTMARK_TAG_MAX_LENGTH })[0] }
        : { Metadata: postmarkMetadata(email.tags) }
      : {}),
  } as Message;
}

export const postmarkProvider = {
  type: 'mailapi_server',
  name: 'Postmark',
  description: 'Postmark: transactional mail service, authenticated with a server API token.',
  configSchema,
  fields: {
    serverToken: {
      label: 'Server API token',
      type: 'password',
      placeholder: '00000000-0000-0000-0000-000000000000',
    },
    webhookUsername: { label: 'Webhook basic auth user', type: 'password', placeholder: 'postmark' },
    webhookPassword: { label: 'Webhook basic auth password', type: 'password', placeholder: 'Password' },
    webhookToken: {
      label: 'Webhook token (X-Postmark-Webhook-Token header)',
      type: 'password',
      placeholder: 'A long random string',
    },
  },
  endpointVariable: 'PROVIDER_ENDPOINT_POSTMARK',
  // "Total message size, including attachments, can be 10 MB", counted after base64 (Postmark).
  maxMessageBytes: 10_000_000,
  classifyError,
  create(config, context): EmailProvider {
    const transport = httpTransportFor('https://api.postmarkapp.com', context);
    const base = new URL(transport.baseUrl);
    const { ServerClient } = postmarkSdk();
    const client = new ServerClient(config.serverToken, {
      useHttps: base.protocol === 'https:',
      requestHost: `${base.host}${base.pathname.replace(/\/+$/, '')}`,
      fetch: transport.fetch,
      // Seconds; the SDK's default of 60 ended a request before a longer send deadline.
      timeout: Math.ceil(context.requestTimeoutMs / 1000),
    });
    return {
      send: (email, options = {}) =>
        sendUnderSignal(
          'Postmark',
          options.signal,
          async () => {
            const result = await client.sendEmail(toPostmark(email));
            return { providerMessageId: result.MessageID };
          },
          classifyError,
        ),
      async verify() {
        try {
          const server = await client.getServer();
          return { success: true, message: `Authenticated with Postmark as server ${server.Name}` };
        } catch (error) {
          return { success: false, message: classifyError(error).message };
        }
      },
      close: () => transport.close(),
    };
  },
} satisfies ProviderDefinition<'mailapi_server', typeof configSchema>;
