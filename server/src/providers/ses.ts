import type MailComposerClass from 'nodemailer/lib/mail-composer';
import { z } from 'zod';
import type { ProviderDefinition } from './definition.ts';
import { classifyHttpFailure, errorMessage, httpTransportFor, sendUnderSignal } from './http-transport.ts';
import { lazyModule } from './lazy-module.ts';
import { envelopeAddress } from './mailbox-address.ts';
import { mimeMessageOptions } from './mime-message.ts';
import { restrictedTags } from './provider-tags.ts';
import { type EmailProvider, type OutgoingEmail, ProviderError } from './types.ts';

const sesSdk = lazyModule<typeof import('@aws-sdk/client-sesv2')>('@aws-sdk/client-sesv2');
const mailComposer = lazyModule<typeof MailComposerClass>('nodemailer/lib/mail-composer');

/**
 * `mailapi_cloud` = Amazon SES v2 (https://docs.aws.amazon.com/ses/latest/APIReference-V2/), through
 * the official `@aws-sdk/client-sesv2`. Send: `SendEmail` (`POST /v2/email/outbound-emails`, JSON,
 * AWS Signature V4) with `Content.Raw`: the whole MIME message built by nodemailer's MailComposer,
 * so attachments, Reply-To and custom headers travel exactly as composed; Destination names every
 * recipient (Bcc is not in the composed headers). Answered `{MessageId}`. Verify: `GetAccount`
 * (`GET /v2/email/account`). Errors: JSON `{message}` with the type in `X-Amzn-ErrorType`.
 */

/** Regions a `mailapi_cloud` adapter may name (spec). */
export const MAILAPI_CLOUD_REGIONS = [
  'us-east-1',
  'us-west-2',
  'eu-west-1',
  'eu-central-1',
  'ap-south-1',
  'ap-southeast-2',
] as const;

const configSchema = z.strictObject({
  accessKeyId: z.string().min(1),
  secretAccessKey: z.string().min(1),
  region: z.enum(MAILAPI_CLOUD_REGIONS),
  // Issue #11: the SNS topic whose notifications the eventsUrl accepts (others are refused);
  // optional. SNS messages are always verified against Amazon's signing certificate.
  webhookTopicArn: z.string().min(1).optional(),
});

/** An AWS SDK service exception: `name` is the error type, `$metadata.httpStatusCode` the status. */
interface AwsServiceError {
  name: string;
  message: string;
  $metadata?: { httpStatusCode?: number };
  $response?: unknown;
}

function classifyError(error: unknown): ProviderError {
  if (error instanceof ProviderError) return error;
  const aws = error as AwsServiceError | undefined;
  const status = aws?.$metadata?.httpStatusCode;
  if (status !== undefined) {
    return classifyHttpFailure({ status, message: aws!.message, code: aws!.name, cause: error });
  }
  const code = (error as { code?: unknown } | undefined)?.code;
  return classifyHttpFailure({
    message: errorMessage(error),
    code: typeof code === 'string' ? code : undefined,
    cause: error,
  });
}

/** The raw MIME message of `email` (RFC 5322), without a Bcc header. */
function composeMime(email: OutgoingEmail): Promise<Buffer> {
  const MailComposer = mailComposer();
  const composer = new MailComposer(mimeMessageOptions(email));
  return composer.compile().build();
}

export const sesProvider = {
  type: 'mailapi_cloud',
  name: 'Amazon SES',
  description:
    'Amazon Simple Email Service: cloud mail service, authenticated with IAM access keys in one AWS region.',
  configSchema,
  fields: {
    accessKeyId: { label: 'Access key ID', type: 'text', placeholder: 'AKIA...' },
    secretAccessKey: { label: 'Secret access key', type: 'password', placeholder: 'Secret access key' },
    region: { label: 'Region', type: 'select', placeholder: 'us-east-1' },
    webhookTopicArn: {
      label: 'SNS topic ARN of the event notifications',
      type: 'text',
      placeholder: 'arn:aws:sns:us-east-1:123456789012:ses-events',
    },
  },
  endpointVariable: 'PROVIDER_ENDPOINT_SES',
  // SES v2 SendEmail: a raw message of at most 40 MB after encoding.
  maxMessageBytes: 40_000_000,
  classifyError,
  create(config, context): EmailProvider {
    const transport = httpTransportFor(`https://email.${config.region}.amazonaws.com`, context);
    const { GetAccountCommand, SESv2Client, SendEmailCommand } = sesSdk();
    const client = new SESv2Client({
      region: config.region,
      credentials: { accessKeyId: config.accessKeyId, secretAccessKey: config.secretAccessKey },
      ...(transport.trusted ? { endpoint: transport.baseUrl } : {}),
      requestHandler: {
        httpAgent: transport.httpAgent,
        httpsAgent: transport.httpsAgent,
        // Without throwOnRequestTimeout the SDK only warns on the console and waits on.
        requestTimeout: context.requestTimeoutMs,
        throwOnRequestTimeout: true,
      },
      // The queue retries (with backoff) and may fall back to another adapter: one attempt here.
      maxAttempts: 1,
    });
    return {
      send: (email, options = {}) =>
        sendUnderSignal(
          'Amazon SES',
          options.signal,
          async () => {
            const raw = await composeMime(email);
            const tags = restrictedTags(email.tags).map(({ name, value }) => ({ Name: name, Value: value }));
            const result = await client.send(
              new SendEmailCommand({
                // The envelope: bare addresses (the names are in the raw message's headers).
                FromEmailAddress: envelopeAddress(email.from),
                Destination: {
                  ToAddresses: email.to.map(envelopeAddress),
                  ...(email.cc?.length ? { CcAddresses: email.cc.map(envelopeAddress) } : {}),
                  ...(email.bcc?.length ? { BccAddresses: email.bcc.map(envelopeAddress) } : {}),
                },
                ...(email.replyTo?.length ? { ReplyToAddresses: email.replyTo.map(envelopeAddress) } : {}),
                Content: { Raw: { Data: raw } },
                ...(tags.length ? { EmailTags: tags } : {}),
              }),
              options.signal ? { abortSignal: options.signal } : {},
            );
            if (!result.MessageId)
              throw classifyHttpFailure({ message: 'Amazon SES answered without a MessageId' });
            return { providerMessageId: result.MessageId };
          },
          classifyError,
        ),
      async verify() {
        try {
          await client.send(new GetAccountCommand({}));
          return { success: true, message: `Authenticated with Amazon SES in ${config.region}` };
        } catch (error) {
          return { success: false, message: classifyError(error).message };
        }
      },
      async close() {
        client.destroy();
        await transport.close();
      },
    };
  },
} satisfies ProviderDefinition<'mailapi_cloud', typeof configSchema>;
