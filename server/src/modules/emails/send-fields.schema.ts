import { z } from 'zod';
import { HEADER_TEXT_MESSAGE, isHeaderText, mailboxSchema } from '../../providers/mailbox-address.ts';
import type { EmailTags } from '../../providers/types.ts';

/**
 * The request schema of the send fields of issue #10 beyond template, `to`, `from` and variables:
 * their limits, the header and text rules, and the checks across fields. How they are stored and
 * used is in send-fields.ts.
 */

/** Most addresses of `to` + `cc` + `bcc` together (SES and Postmark accept 50 per message). */
export const MAX_TOTAL_RECIPIENTS = 50;
/** Most files attached to one email. */
export const MAX_ATTACHMENTS = 10;
/** Most decoded bytes of all attachments of one email together (10 MB). */
export const MAX_ATTACHMENT_BYTES = 10 * 1024 * 1024;
/** How far ahead `scheduledAt` may be (30 days, in ms). */
export const MAX_SCHEDULE_AHEAD_MS = 30 * 24 * 60 * 60 * 1000;
/** Most bytes of `metadata` as JSON (issue #10: ≤ 2 KB). */
export const MAX_METADATA_BYTES = 2048;
/** Most entries of `tags`, `metadata` and `headers` each. */
export const MAX_MAP_ENTRIES = 50;

/**
 * Headers a caller may not set: the ones the message is built from (addresses, subject, MIME
 * structure, ids and dates; RFC 5322 §3.6, RFC 2045 §3-6), which a second copy would contradict,
 * and the ones only transfer agents and signers write (trace fields, RFC 5322 §3.6.7; resent
 * fields, §3.6.6; DKIM-Signature, RFC 6376 §3.5). Compared case-insensitively; together with
 * {@link REFUSED_HEADER_PREFIXES}.
 */
export const REFUSED_HEADERS = new Set([
  'from',
  'sender',
  'to',
  'cc',
  'bcc',
  'reply-to',
  'subject',
  'date',
  'message-id',
  'mime-version',
  'return-path',
  'received',
  'dkim-signature',
  'x-postwright-email-id',
  // SendGrid's reserved headers (Mail Send v3, `headers`): refused by it with 400.
  'x-sg-id',
  'x-sg-eid',
]);

/** Header name prefixes a caller may not use: every MIME `Content-*` field (RFC 2045) and `Resent-*`. */
export const REFUSED_HEADER_PREFIXES = ['content-', 'resent-'] as const;

/** True when a caller may not set header `name` ({@link REFUSED_HEADERS}, {@link REFUSED_HEADER_PREFIXES}). */
export function isRefusedHeader(name: string): boolean {
  const lower = name.toLowerCase();
  return REFUSED_HEADERS.has(lower) || REFUSED_HEADER_PREFIXES.some((prefix) => lower.startsWith(prefix));
}

/** No NUL character: PostgreSQL text cannot hold U+0000 (PostgreSQL docs, "Character Types"). */
function hasNoNul(value: string): boolean {
  return !value.includes('\u0000');
}
const NO_NUL = 'must not contain the NUL character (U+0000)';

/**
 * An id or name the database looks up or stores (template and adapter ids, PDF file names): 1 to
 * `max` characters, no NUL (the database would refuse it, a 400 INVALID_INPUT instead of this
 * field's VALIDATION_ERROR).
 */
export const storedText = (max: number) => z.string().min(1).max(max).refine(hasNoNul, NO_NUL);

/** A header-safe text of at most `max` characters (no control characters, see isHeaderText). */
const headerText = (max: number) => z.string().max(max).refine(isHeaderText, HEADER_TEXT_MESSAGE);

/**
 * zod's `error` option for a union (a field of two shapes): when the value had the type of one
 * option only, that option's first issue ("Too big: expected array to have <=50 items", `Invalid
 * key in record: "a b"`), else `fallback` (the value had neither type, or fits both). zod's own
 * message for both cases was a bare "Invalid input" (review finding, session 22).
 * @returns the issue's message, or undefined for an issue that is not the union's own.
 */
export function unionIssueMessage(fallback: string) {
  return (issue: z.core.$ZodRawIssue): string | undefined => {
    if (issue.code !== 'invalid_union') return undefined;
    const typed = issue.errors.filter(
      (issues) => !issues.every((inner) => inner.code === 'invalid_type' && inner.path.length === 0),
    );
    const first = typed.length === 1 ? typed[0]?.[0] : undefined;
    if (!first) return fallback;
    return first.path.length === 0 ? first.message : `${first.message}: "${first.path.join('.')}"`;
  };
}

/** One mailbox or a list of 1 to `max` of them (like `to`). */
export const mailboxes = (max: number) =>
  z.union([mailboxSchema, z.array(mailboxSchema).min(1).max(max)], {
    error: unionIssueMessage('must be an email address or a list of them'),
  });

/** A header field name (RFC 5322 §3.6.8: printable US-ASCII except colon). */
const headerName = z
  .string()
  .min(1)
  .max(100)
  .regex(/^[!-9;-~]+$/, 'must be a header name (printable ASCII without ":" or spaces)')
  .refine((name) => !isRefusedHeader(name), {
    message: `must not be one of the headers the message is built from or transfer agents write (${[
      ...REFUSED_HEADERS,
      ...REFUSED_HEADER_PREFIXES.map((prefix) => `${prefix}*`),
    ].join(', ')})`,
  });

const stringMap = (keys: z.ZodString, value: z.ZodType<string>) =>
  z
    .record(keys, value)
    .refine((map) => Object.keys(map).length <= MAX_MAP_ENTRIES, `at most ${MAX_MAP_ENTRIES} entries`);

const attachmentSchema = z.object({
  filename: z
    .string()
    .trim()
    .min(1)
    .max(255)
    .refine(isHeaderText, HEADER_TEXT_MESSAGE)
    .refine((name) => !/[/\\]/.test(name), 'must be a file name without a path'),
  /** Standard base64 (RFC 4648 §4) of the file's bytes. */
  content: z.base64(),
  contentType: z
    .string()
    .max(255)
    .regex(/^[\w.+-]+\/[\w.+-]+$/, 'must be a MIME type such as application/pdf')
    .optional(),
});

/** The issue #10 fields of `POST /api/v1/send`'s body (merged into the send body schema). */
export const sendFieldsShape = {
  cc: mailboxes(MAX_TOTAL_RECIPIENTS)
    .optional()
    .describe('Carbon-copy recipients; to + cc + bcc hold at most 50 addresses'),
  bcc: mailboxes(MAX_TOTAL_RECIPIENTS)
    .optional()
    .describe('Blind carbon-copy recipients: in the envelope only, never in a header'),
  replyTo: mailboxes(10).optional().describe('Reply-To addresses (up to 10)'),
  /** Subject override: Liquid, rendered with the email's variables (replaces the template's). */
  subject: z
    .string()
    .trim()
    .min(1)
    .max(998)
    .refine(isHeaderText, HEADER_TEXT_MESSAGE)
    .optional()
    .describe("Replaces the template's subject; Liquid, rendered with the variables"),
  /** One of the team's adapters (else the team's default sending adapter). */
  adapterId: storedText(200)
    .optional()
    .describe("One of the team's active adapters (default: the team's default adapter)"),
  headers: stringMap(headerName, headerText(998))
    .optional()
    .describe(
      'Extra header lines (≤ 50). Refused: From, Sender, To, Cc, Bcc, Reply-To, Subject, Date, Message-ID, MIME-Version, Content-*, Resent-*, Return-Path, Received, DKIM-Signature',
    ),
  tags: z
    .union(
      [
        // Issue #10's "string list": labels, to each provider's own tag field.
        z
          .array(headerText(256).min(1))
          .max(MAX_MAP_ENTRIES)
          .refine((labels) => new Set(labels).size === labels.length, 'each tag at most once'),
        stringMap(
          z
            .string()
            .min(1)
            .max(64)
            .regex(/^[A-Za-z0-9_-]+$/, 'tag names use letters, digits, "_" and "-"'),
          headerText(256),
        ),
      ],
      { error: unionIssueMessage('must be a list of labels or an object of label names to values') },
    )
    .optional()
    .describe(
      "Tags: a list of labels (each provider's tag field: Resend/SES tags, SendGrid categories, Mailgun o:tag, Postmark Tag), or labels name → value (Resend/SES tags, SendGrid custom_args, Mailgun v: variables, Postmark Metadata)",
    ),
  metadata: stringMap(z.string().min(1).max(64), z.string().max(MAX_METADATA_BYTES))
    .refine(
      (map) => Buffer.byteLength(JSON.stringify(map)) <= MAX_METADATA_BYTES,
      `at most ${MAX_METADATA_BYTES} bytes as JSON`,
    )
    .optional()
    .describe('Strings kept with the email (≤ 2 KB as JSON), shown on its log'),
  attachments: z
    .array(attachmentSchema)
    .max(MAX_ATTACHMENTS)
    .optional()
    .describe('Up to 10 files, at most 10 MB decoded together; content is standard base64'),
  /**
   * ISO 8601 with offset; at most 30 days ahead. The email stays `queued` until then; a past time
   * is sent at once. Not before 1970-01-01T00:00:00Z (a year such as 0000 is valid ISO 8601 but
   * outside what the database's timestamp takes, and never a real schedule).
   */
  scheduledAt: z.iso
    .datetime({ offset: true })
    .refine((value) => Date.parse(value) >= 0, 'must not be before 1970-01-01T00:00:00Z')
    .refine(
      (value) => Date.parse(value) <= Date.now() + MAX_SCHEDULE_AHEAD_MS,
      'must be at most 30 days ahead',
    )
    .optional()
    .describe('ISO 8601 with offset, from 1970 to ≤ 30 days ahead: the email stays queued until then'),
  /** Issue #11 built-in tracking: overrides the template's `trackOpens` for this email. */
  trackOpens: z
    .boolean()
    .optional()
    .describe("Open tracking pixel for this email (default: the template's trackOpens)"),
  /** Issue #11 built-in tracking: overrides the template's `trackClicks` for this email. */
  trackClicks: z
    .boolean()
    .optional()
    .describe("Click-tracking links for this email (default: the template's trackClicks)"),
};

/** The fields of {@link sendFieldsShape} as parsed, with the send body's own fields the checks read. */
export interface SendFieldsInput {
  to: string | string[];
  cc?: string | string[] | undefined;
  bcc?: string | string[] | undefined;
  replyTo?: string | string[] | undefined;
  subject?: string | undefined;
  adapterId?: string | undefined;
  headers?: Record<string, string> | undefined;
  tags?: EmailTags | undefined;
  metadata?: Record<string, string> | undefined;
  attachments?: { filename: string; content: string; contentType?: string | undefined }[] | undefined;
  scheduledAt?: string | undefined;
  trackOpens?: boolean | undefined;
  trackClicks?: boolean | undefined;
}

/** `value` as a list (a single address is a one-element list, absent is empty). */
export function asList(value: string | string[] | undefined): string[] {
  if (value === undefined) return [];
  return Array.isArray(value) ? value : [value];
}

/**
 * The path of a string (value or object key) in `value` that PostgreSQL cannot store as sent, and
 * why: one that is not well-formed UTF-16 (an unpaired surrogate such as "\ud800", which JSON
 * allows but UTF-8 cannot carry: for a text column node-postgres sends U+FFFD in its place, so the
 * stored text would silently differ, and a jsonb column refuses the `\ud800` escape JSON.stringify
 * writes; review finding, session 18), or one holding U+0000 (jsonb and text
 * refuse it: review finding, session 16, a NUL in `variables` or `metadata` failed the shared accept
 * transaction of every team's sends in it, which were then written again one at a time). Undefined
 * when there is none. For a bad key, the path of its object. Iterative, so JSON nested thousands
 * deep cannot overflow the stack.
 */
function unstorableStringPath(value: unknown): { path: (string | number)[]; nul: boolean } | undefined {
  interface Node {
    value: unknown;
    parent: Node | undefined;
    key: string | number | undefined;
  }
  const pathOf = (node: Node): (string | number)[] => {
    const path: (string | number)[] = [];
    for (let at: Node | undefined = node; at?.key !== undefined; at = at.parent) path.unshift(at.key);
    return path;
  };
  const problem = (text: string) =>
    !text.isWellFormed() ? { nul: false } : text.includes('\u0000') ? { nul: true } : undefined;
  const stack: Node[] = [{ value, parent: undefined, key: undefined }];
  for (let node = stack.pop(); node; node = stack.pop()) {
    const current = node.value;
    if (typeof current === 'string') {
      const found = problem(current);
      if (found) return { path: pathOf(node), ...found };
    } else if (Array.isArray(current)) {
      for (let index = current.length - 1; index >= 0; index--) {
        stack.push({ value: current[index], parent: node, key: index });
      }
    } else if (current && typeof current === 'object') {
      for (const [key, item] of Object.entries(current)) {
        const found = problem(key);
        if (found) return { path: pathOf(node), ...found };
        stack.push({ value: item, parent: node, key });
      }
    }
  }
  return undefined;
}

/**
 * Adds a VALIDATION_ERROR issue at the first string of `value` PostgreSQL cannot store (see
 * {@link unstorableStringPath}), at its path within the refined value (zod puts the field's path
 * in front). For any body part stored as text or jsonb (the send body; send-test's `variables`).
 */
export function refuseUnstorableStrings(value: unknown, ctx: z.RefinementCtx): void {
  const found = unstorableStringPath(value);
  if (!found) return;
  ctx.addIssue({
    code: 'custom',
    path: found.path,
    message: found.nul
      ? NO_NUL
      : 'must be well-formed Unicode (no unpaired UTF-16 surrogate such as \\ud800)',
  });
}

export function checkSendFields(input: SendFieldsInput, ctx: z.RefinementCtx): void {
  refuseUnstorableStrings(input, ctx);
  const recipients = asList(input.to).length + asList(input.cc).length + asList(input.bcc).length;
  if (recipients > MAX_TOTAL_RECIPIENTS) {
    ctx.addIssue({
      code: 'custom',
      path: ['to'],
      message: `to, cc and bcc hold at most ${MAX_TOTAL_RECIPIENTS} recipients together (got ${recipients})`,
    });
  }
  const bytes = (input.attachments ?? []).reduce(
    (sum, file) => sum + Buffer.byteLength(file.content, 'base64'),
    0,
  );
  if (bytes > MAX_ATTACHMENT_BYTES) {
    ctx.addIssue({
      code: 'custom',
      path: ['attachments'],
      message: `attachments hold at most ${MAX_ATTACHMENT_BYTES} bytes together once decoded (got ${bytes})`,
    });
  }
}
