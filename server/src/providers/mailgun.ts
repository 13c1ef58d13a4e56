import { z } from 'zod';
import type { ProviderDefinition } from './definition.ts';
import { classifyHttpFailure, errorMessage, httpTransportFor, sendUnderSignal } from './http-transport.ts';
import { lazyModule } from './lazy-module.ts';
import { forwardedMailbox } from './mailbox-address.ts';
import { fittedLabels, MAILGUN_TAGS } from './provider-tags.ts';
import { type EmailProvider, isTagList, type OutgoingEmail, ProviderError } from './types.ts';

const formData = lazyModule<typeof import('form-data')>('form-data');
const mailgunSdk = lazyModule<typeof import('mailgun.js').default>('mailgun.js');

/**
 * `mailapi_domain` = Mailgun (https://documentation.mailgun.com/docs/mailgun/api-reference/), through
 * the official `mailgun.js` SDK with the `form-data` package. Send: `POST /v3/<domain>/messages`
 * (multipart/form-data, HTTP Basic `api:<apiKey>`), answered `{id, message}`. Verify:
 * `GET /v4/domains/<domain>`. Errors are JSON `{message}` (or plain text).
 *
 * mailgun.js takes no http agent (its bundled axios uses Node's global agent, keep-alive since Node
 * 19), so the outbound policy is applied by resolving the API host once per instance
 * ({@link HttpTransport.checkHost}); the host is ours (per region) or the operator's, never a user's.
 */

/** Regions a Mailgun account lives in; `us` when omitted (spec). */
export const MAILAPI_DOMAIN_REGIONS = ['us', 'eu'] as const;

/** The API of each region (Mailgun, "Base URL"; spec: `us` → api.mailgun.net, `eu` → api.eu.mailgun.net). */
export const MAILGUN_REGION_BASE_URLS: Record<(typeof MAILAPI_DOMAIN_REGIONS)[number], string> = {
  us: 'https://api.mailgun.net',
  eu: 'https://api.eu.mailgun.net',
};

const configSchema = z.strictObject({
  apiKey: z.string().min(1),
  domain: z.string().min(1),
  region: z.enum(MAILAPI_DOMAIN_REGIONS).default('us'),
  // Issue #11: the HTTP webhook signing key (Mailgun: Sending → Webhooks); optional (without it the
  // eventsUrl token alone authenticates the events).
  webhookSigningKey: z.string().min(1).optional(),
});

/**
 * mailgun.js wraps every failure in a MailgunAPIError: `status` (400 when no response came),
 * `details` (the error body's message, or the network error's message), `message` (the body's
 * `error` field or the status text, or the network error's code such as `ECONNREFUSED`).
 */
interface MailgunApiError {
  type: 'MailgunAPIError';
  status: number;
  message: string;
  details: string;
}

function isMailgunError(error: unknown): error is MailgunApiError {
  return (
    typeof error === 'object' && error !== null && (error as { type?: unknown }).type === 'MailgunAPIError'
  );
}

/** A network error code as mailgun.js reports it for a request that got no response. */
const NETWORK_CODE = /^(E[A-Z0-9_]+|ERR_[A-Z0-9_]+)$/;

function classifyError(error: unknown): ProviderError {
  if (error instanceof ProviderError) return error;
  if (isMailgunError(error)) {
    // No response: mailgun.js reports status 400 and the network code as message (see above).
    if (NETWORK_CODE.test(error.message)) {
      return classifyHttpFailure({
        message: error.details || error.message,
        code: error.message,
        cause: error,
      });
    }
    return classifyHttpFailure({
      status: error.status,
      message: error.details || error.message,
      cause: error,
    });
  }
  return classifyHttpFailure({ message: errorMessage(error), cause: error });
}

/** The Mailgun form fields of `email` (`h:` custom headers, `o:tag` tags, `v:` user variables). */
function toMailgun(email: OutgoingEmail): Record<string, unknown> {
  const data: Record<string, unknown> = {
    from: forwardedMailbox(email.from),
    to: email.to.map(forwardedMailbox),
    subject: email.subject,
    html: email.html,
    text: email.text,
  };
  if (email.cc?.length) data.cc = email.cc.map(forwardedMailbox);
  if (email.bcc?.length) data.bcc = email.bcc.map(forwardedMailbox);
  if (email.replyTo?.length) data['h:Reply-To'] = email.replyTo.map(forwardedMailbox).join(', ');
  if (email.messageId) data['h:Message-Id'] = email.messageId;
  for (const [name, value] of Object.entries(email.headers ?? {})) data[`h:${name}`] = value;
  // Labels as o:tag (Mailgun's tags, several fields of one name), labels name → value as v: variables.
  if (isTagList(email.tags)) {
    if (email.tags.length) data['o:tag'] = fittedLabels(email.tags, { ...MAILGUN_TAGS, ascii: true });
  } else for (const [name, value] of Object.entries(email.tags ?? {})) data[`v:${name}`] = value;
  if (email.attachments?.length) {
    data.attachment = email.attachments.map((a) => ({
      filename: a.filename,
      data: a.content,
      contentType: a.contentType,
    }));
  }
  return data;
}

export const mailgunProvider = {
  type: 'mailapi_domain',
  name: 'Mailgun',
  description: 'Mailgun: hosted email API that sends from a verified sending domain, in its US or EU region.',
  configSchema,
  fields: {
    apiKey: { label: 'API key', type: 'password', placeholder: 'key-...' },
    domain: { label: 'Sending domain', type: 'text', placeholder: 'mg.example.com' },
    region: { label: 'Region', type: 'select', placeholder: 'us' },
    webhookSigningKey: { label: 'Webhook signing key', type: 'password', placeholder: 'key-...' },
  },
  endpointVariable: 'PROVIDER_ENDPOINT_MAILGUN',
  // Mailgun: "The maximum message size Mailgun supports is 25MB".
  maxMessageBytes: 25_000_000,
  classifyError,
  create(config, context): EmailProvider {
    const transport = httpTransportFor(MAILGUN_REGION_BASE_URLS[config.region], context);
    const Mailgun = mailgunSdk();
    const client = new Mailgun(formData()).client({
      username: 'api',
      key: config.apiKey,
      url: transport.baseUrl,
      // Its axios, in ms; none by default (a request given up at the deadline held its slot).
      timeout: context.requestTimeoutMs,
    });
    return {
      send: (email, options = {}) =>
        sendUnderSignal(
          'Mailgun',
          options.signal,
          async () => {
            await transport.checkHost();
            const result = await client.messages.create(config.domain, toMailgun(email) as never);
            if (!result.id) throw classifyHttpFailure({ message: 'Mailgun answered without an id' });
            return { providerMessageId: result.id };
          },
          classifyError,
        ),
      async verify() {
        try {
          await transport.checkHost();
          await client.domains.get(config.domain);
          return { success: true, message: `Authenticated with Mailgun; domain ${config.domain} found` };
        } catch (error) {
          return { success: false, message: classifyError(error).message };
        }
      },
      close: () => transport.close(),
    };
  },
} satisfies ProviderDefinition<'mailapi_domain', typeof configSchema>;
