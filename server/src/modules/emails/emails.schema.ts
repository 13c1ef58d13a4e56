import { z } from 'zod';
import { paginationQuery } from '../../http/envelope.ts';
import { mailboxSchema } from '../../providers/mailbox-address.ts';
import { type VariablesLimits, variablesSchema } from '../rendering/index.ts';
import { recipientView } from './email-recipients.ts';
import { EMAIL_STATUSES } from './email-status.ts';
import { checkSendFields, mailboxes, sendFieldsShape, storedText } from './send-fields.schema.ts';
import { sendFieldsViewShape } from './send-fields.ts';
import { MAX_PDF_ATTACHMENTS } from './send-pdfs.ts';

/** Most recipients one send may address (common provider limit; SES and Postmark use 50). */
export const MAX_RECIPIENTS = 50;

/**
 * Body of `POST /api/v1/send` (spec "Public API"; issue #10 fields in send-fields.ts). `variables`
 * (also each PDF attachment's) is held to `limits` ({@link variablesSchema}): over them, 400
 * VALIDATION_ERROR naming the limit. `to` + `cc` + `bcc` ≤ 50 and attachments ≤ 10 MB decoded are
 * checked across fields ({@link checkSendFields}).
 */
export function sendBodySchema(limits: VariablesLimits) {
  const variables = variablesSchema(limits);
  return z
    .object({
      templateId: storedText(200),
      to: mailboxes(MAX_RECIPIENTS),
      variables: variables.optional(),
      from: mailboxSchema.optional(),
      pdfAttachments: z
        .array(
          z.object({
            templateId: storedText(200),
            filename: z.string().trim().pipe(storedText(200)),
            variables: variables.optional(),
          }),
        )
        .max(MAX_PDF_ATTACHMENTS)
        .optional()
        .describe(
          "Up to 5 PDFs rendered from the team's templates, in order; each inherits the email's variables unless it has its own",
        ),
      ...sendFieldsShape,
    })
    .superRefine(checkSendFields);
}
export type SendInput = z.infer<ReturnType<typeof sendBodySchema>>;

export const acceptedSendView = z.object({ id: z.string(), jobId: z.string(), status: z.literal('queued') });

export const emailIdParams = z.object({ id: z.string().min(1) });

export const emailStatusView = z.object({
  id: z.string(),
  status: z.enum(EMAIL_STATUSES),
  sentAt: z.string().nullable(),
  hasPdfAttachment: z.boolean(),
});

/** Latest instant a range bound may name (9999-12-31T23:59:59.999Z; PostgreSQL takes later ones, JS dates not). */
const LAST_INSTANT_MS = 253_402_300_799_999;

/**
 * A bound of a log range (spec: ISO 8601): a date-time with its offset (`2026-11-27T10:00:00Z`,
 * `…+01:00`), or a date alone (`2026-11-27`: as `from` 00:00 UTC that day, as `to` the whole day,
 * see emails.repository.ts `createdWithin`), between 1970 and 9999 (an instant outside failed in
 * the database as unsupported data; review finding, session 15).
 */
const isoDate = z
  .union([z.iso.datetime({ offset: true }), z.iso.date()], {
    // Not zod's "Invalid input" (review finding, session 22).
    error: 'must be an ISO 8601 date (2026-11-27) or date-time with its offset (2026-11-27T10:00:00Z)',
  })
  .refine((value) => {
    const at = Date.parse(value);
    return at >= 0 && at <= LAST_INSTANT_MS;
  }, 'must lie between 1970-01-01 and 9999-12-31 (UTC)');

export const logListQuery = paginationQuery.extend({
  status: z.enum(EMAIL_STATUSES).optional(),
  templateId: z.string().min(1).optional(),
  from: isoDate.optional(),
  to: isoDate.optional(),
  search: z.string().max(200).optional(),
});
export type LogListQuery = z.infer<typeof logListQuery>;

export const logListItem = z.object({
  id: z.string(),
  templateId: z.string().nullable(),
  templateName: z.string(),
  toAddresses: z.array(z.string()),
  subject: z.string(),
  status: z.enum(EMAIL_STATUSES),
  createdAt: z.string(),
  sentAt: z.string().nullable(),
});

export const emailEventView = z.object({
  status: z.string(),
  occurredAt: z.string(),
  detail: z.record(z.string(), z.unknown()),
});

/** One entry of `GET /api/logs/:id/events` (issue #11): the email's history, oldest first. */
export const emailHistoryEntryView = z.object({
  status: z.enum(EMAIL_STATUSES),
  at: z.string(),
  source: z.string(),
  detail: z.record(z.string(), z.unknown()),
});

export const logView = logListItem.extend({
  teamId: z.string(),
  templateVersionId: z.string(),
  adapterId: z.string(),
  apiKeyId: z.string().nullable(),
  fromAddress: z.string(),
  variables: z.record(z.string(), z.unknown()),
  providerMessageId: z.string().nullable(),
  errorMessage: z.string().nullable(),
  hasPdfAttachment: z.boolean(),
  jobId: z.string(),
  attemptCount: z.number(),
  deliveredAt: z.string().nullable(),
  openedAt: z.string().nullable(),
  clickedAt: z.string().nullable(),
  bouncedAt: z.string().nullable(),
  failedAt: z.string().nullable(),
  spamAt: z.string().nullable(),
  updatedAt: z.string(),
  events: z.array(emailEventView),
  ...sendFieldsViewShape,
  /** Issue #11: each recipient's outcome (email-recipients.ts). */
  recipients: z.array(recipientView),
});

/** `GET /api/logs/:id/rendered`: the email re-rendered from its logged version and variables. */
export const renderedEmailView = z.object({ subject: z.string(), html: z.string(), text: z.string() });

export const statsQuery = z.object({ from: isoDate.optional(), to: isoDate.optional() });

export const statsView = z.object({
  total: z.number(),
  ...Object.fromEntries(EMAIL_STATUSES.map((status) => [status, z.number()])),
} as { total: z.ZodNumber } & Record<(typeof EMAIL_STATUSES)[number], z.ZodNumber>);
