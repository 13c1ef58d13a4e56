import type { CreateEmailOptions } from 'resend';
import { z } from 'zod';
import type { ProviderDefinition } from './definition.ts';
import { classifyHttpFailure, errorMessage, httpTransportFor, sendUnderSignal } from './http-transport.ts';
import { lazyModule } from './lazy-module.ts';
import { forwardedMailbox } from './mailbox-address.ts';
import { restrictedTags } from './provider-tags.ts';
import { type EmailProvider, hasTags, type OutgoingEmail, ProviderError } from './types.ts';

const resendSdk = lazyModule<typeof import('resend')>('resend');

/**
 * `mailapi_a` = Resend (https://resend.com/docs/api-reference), through the official `resend` SDK.
 * Send: `POST /emails` (JSON, `Authorization: Bearer <apiKey>`), answered `{id}`. Verify:
 * `GET /domains`. Errors are JSON `{statusCode, message, name}`.
 */

// webhookSecret (issue #11): the Svix signing secret (`whsec_…`) of the Resend webhook that posts to
// the adapter's eventsUrl; optional (without it the URL's token alone authenticates the events).
const configSchema = z.strictObject({
  apiKey: z.string().min(1),
  webhookSecret: z.string().min(1).optional(),
});

/** What the SDK reports instead of throwing (it never throws for an HTTP failure). */
interface ResendError {
  message: string;
  name?: string;
  statusCode?: number | null;
}

/**
 * A restricted Resend key ("sending access") may send but not list domains: its `GET /domains` is
 * refused with this error name, which still proves the key is valid.
 */
const RESTRICTED_KEY = 'restricted_api_key';

function classifyError(error: unknown): ProviderError {
  if (error instanceof ProviderError) return error;
  if (error && typeof error === 'object' && 'message' in error && !(error instanceof Error)) {
    const failure = error as ResendError;
    return classifyHttpFailure({
      status: failure.statusCode ?? undefined,
      message: failure.message,
      code: failure.name,
      cause: error,
    });
  }
  return classifyHttpFailure({ message: errorMessage(error), cause: error });
}

/** The Resend request body of `email` (SDK field names; the SDK turns them into the API's). */
function toResend(email: OutgoingEmail): CreateEmailOptions {
  const headers = { ...email.headers, ...(email.messageId ? { 'Message-ID': email.messageId } : {}) };
  return {
    from: forwardedMailbox(email.from),
    to: email.to.map(forwardedMailbox),
    subject: email.subject,
    html: email.html,
    text: email.text,
    ...(email.cc?.length ? { cc: email.cc.map(forwardedMailbox) } : {}),
    ...(email.bcc?.length ? { bcc: email.bcc.map(forwardedMailbox) } : {}),
    ...(email.replyTo?.length ? { replyTo: email.replyTo.map(forwardedMailbox) } : {}),
    ...(Object.keys(headers).length ? { headers } : {}),
    ...(email.attachments?.length
      ? {
          attachments: email.attachments.map((a) => ({
            filename: a.filename,
            content: a.content,
            contentType: a.contentType,
          })),
        }
      : {}),
    ...(hasTags(email.tags) ? { tags: restrictedTags(email.tags) } : {}),
  };
}

export const resendProvider = {
  type: 'mailapi_a',
  name: 'Resend',
  description: 'Resend: hosted email sending API, authenticated with an API key.',
  configSchema,
  fields: {
    apiKey: { label: 'API key', type: 'password', placeholder: 're_...' },
    webhookSecret: { label: 'Webhook signing secret', type: 'password', placeholder: 'whsec_...' },
  },
  endpointVariable: 'PROVIDER_ENDPOINT_RESEND',
  // Resend: emails of up to 40 MB including attachments after base64 encoding.
  maxMessageBytes: 40_000_000,
  classifyError,
  create(config, context): EmailProvider {
    const transport = httpTransportFor('https://api.resend.com', context);
    const { Resend } = resendSdk();
    const client = new Resend(config.apiKey, { baseUrl: transport.baseUrl });
    // The SDK spreads its request options into fetch's init: our keep-alive pool goes in there.
    const through = (signal?: AbortSignal) =>
      ({ dispatcher: transport.dispatcher, ...(signal ? { signal } : {}) }) as object;
    return {
      send: (email, options = {}) =>
        sendUnderSignal(
          'Resend',
          options.signal,
          async () => {
            const { data, error } = await client.emails.send(toResend(email), through(options.signal));
            if (error || !data) throw classifyError(error ?? { message: 'Resend answered without an id' });
            return { providerMessageId: data.id };
          },
          classifyError,
        ),
      async verify() {
        const { error } = await client.domains.list({}, through());
        if (!error) return { success: true, message: 'Authenticated with Resend' };
        if (error.name === RESTRICTED_KEY) {
          return { success: true, message: 'Authenticated with Resend (the key may only send emails)' };
        }
        return { success: false, message: classifyError(error).message };
      },
      close: () => transport.close(),
    };
  },
} satisfies ProviderDefinition<'mailapi_a', typeof configSchema>;
