import { type EmailTags, isTagList } from './types.ts';

/**
 * How each hosted-API provider takes an email's tags ({@link EmailTags}: a list of labels, or
 * labels name → value), what it refuses (checked at accept: providerTagIssues) and how an email
 * that reaches it anyway (a fallback adapter) gets them fitted.
 */

/**
 * What Amazon SES and Resend accept as a tag's name and value: ASCII letters, digits, `_` and `-`,
 * at most 256 characters (SES API Reference v2 "MessageTag"; Resend API "Send Email", `tags`).
 * Postwright's own `tags` are any header-safe text (SMTP, Mailgun, Postmark and SendGrid take them).
 */
const RESTRICTED_TAG = /^[A-Za-z0-9_-]{1,256}$/;

/** The value a label of the list form gets where the provider's tags are name/value pairs (SES, Resend). */
export const LABEL_TAG_VALUE = 'true';

/** Adapter types whose provider takes only {@link RESTRICTED_TAG} tags. */
export const RESTRICTED_TAG_PROVIDERS: ReadonlySet<string> = new Set(['mailapi_cloud', 'mailapi_a']);

/**
 * Postmark's Metadata limits (Postmark, "Email API" → Metadata and "Custom metadata FAQ"): at most
 * 10 fields, names of at most 20 characters, values of at most 80, and no two names that differ only
 * in case ('a_key' and 'A_Key' are refused over the API). Its `Tag` is one string of at most 1,000
 * characters ("Email API": "Tag: Email tag that allows you to categorize outgoing emails").
 */
export const POSTMARK_METADATA = { maxFields: 10, maxNameLength: 20, maxValueLength: 80 } as const;
export const POSTMARK_TAG_MAX_LENGTH = 1000;

/** SendGrid's bound on `custom_args` (Mail Send v3: "Total custom args size may not exceed 10,000 bytes"), as JSON bytes. */
export const SENDGRID_CUSTOM_ARGS_MAX_BYTES = 10_000;
/** SendGrid `categories` (Mail Send v3): at most 10, each at most 255 characters. */
export const SENDGRID_CATEGORIES = { max: 10, maxLength: 255 } as const;

/** Mailgun `o:tag` (Mailgun "Tags"): at most 10 per message, ASCII, at most 128 characters. */
export const MAILGUN_TAGS = { max: 10, maxLength: 128 } as const;
const ASCII_PRINTABLE = /^[\x20-\x7e]+$/;

/** One tag problem to report at accept: `name` = the tag's name or the label's index; undefined = the tags as a whole. */
export interface ProviderTagIssue {
  name?: string | undefined;
  message: string;
}

/**
 * What the provider of `adapterType` would refuse in `tags` at delivery (review findings, sessions
 * 13 and 16), for the accept path to answer 400 instead of accepting an email bound to fail.
 * Labels name → value: Amazon SES and Resend ({@link RESTRICTED_TAG}), Postmark Metadata
 * ({@link POSTMARK_METADATA}), SendGrid custom_args ({@link SENDGRID_CUSTOM_ARGS_MAX_BYTES}), Mailgun `v:` variables (not empty: its SDK drops
 * empty values). A list of labels: SES and Resend ({@link RESTRICTED_TAG}), Postmark
 * (one `Tag`, ≤ 1,000 characters), SendGrid categories ({@link SENDGRID_CATEGORIES}), Mailgun
 * `o:tag` ({@link MAILGUN_TAGS}). SMTP sends no tags.
 * @returns the issues, none when the provider takes them all.
 */
export function providerTagIssues(adapterType: string, tags: EmailTags | undefined): ProviderTagIssue[] {
  if (tags === undefined) return [];
  return isTagList(tags) ? labelIssues(adapterType, tags) : namedTagIssues(adapterType, tags);
}

function labelIssues(adapterType: string, labels: readonly string[]): ProviderTagIssue[] {
  const issues: ProviderTagIssue[] = [];
  const perLabel = (refuse: (label: string) => boolean, message: string) => {
    labels.forEach((label, index) => {
      if (refuse(label)) issues.push({ name: String(index), message });
    });
  };
  if (RESTRICTED_TAG_PROVIDERS.has(adapterType)) {
    perLabel(
      (label) => !RESTRICTED_TAG.test(label),
      'a tag may hold only ASCII letters, digits, _ and - (at most 256 characters)',
    );
  } else if (adapterType === 'mailapi_server') {
    if (labels.length > 1) issues.push({ message: 'Postmark takes one tag per email' });
    perLabel(
      (label) => label.length > POSTMARK_TAG_MAX_LENGTH,
      `Postmark takes a tag of at most ${POSTMARK_TAG_MAX_LENGTH} characters`,
    );
  } else if (adapterType === 'mailapi_b') {
    if (labels.length > SENDGRID_CATEGORIES.max) {
      issues.push({
        message: `SendGrid takes at most ${SENDGRID_CATEGORIES.max} tags (categories) per email`,
      });
    }
    perLabel(
      (label) => label.length > SENDGRID_CATEGORIES.maxLength,
      `SendGrid takes tags (categories) of at most ${SENDGRID_CATEGORIES.maxLength} characters`,
    );
  } else if (adapterType === 'mailapi_domain') {
    if (labels.length > MAILGUN_TAGS.max) {
      issues.push({ message: `Mailgun takes at most ${MAILGUN_TAGS.max} tags per email` });
    }
    perLabel(
      (label) => label.length > MAILGUN_TAGS.maxLength || !ASCII_PRINTABLE.test(label),
      `Mailgun takes tags of ASCII characters, at most ${MAILGUN_TAGS.maxLength}`,
    );
  }
  return issues;
}

function namedTagIssues(adapterType: string, tags: Readonly<Record<string, string>>): ProviderTagIssue[] {
  const entries = Object.entries(tags);
  if (RESTRICTED_TAG_PROVIDERS.has(adapterType)) {
    return tagsRefusedByRestrictedProviders(tags).map((name) => ({
      name,
      message: 'name and value may hold only ASCII letters, digits, _ and - (at most 256 characters)',
    }));
  }
  if (adapterType === 'mailapi_server') {
    const issues: ProviderTagIssue[] = [];
    if (entries.length > POSTMARK_METADATA.maxFields) {
      issues.push({ message: `Postmark takes at most ${POSTMARK_METADATA.maxFields} metadata fields` });
    }
    const seen = new Set<string>();
    for (const [name, value] of entries) {
      if (name.length > POSTMARK_METADATA.maxNameLength || value.length > POSTMARK_METADATA.maxValueLength) {
        issues.push({
          name,
          message: `Postmark takes names of at most ${POSTMARK_METADATA.maxNameLength} and values of at most ${POSTMARK_METADATA.maxValueLength} characters`,
        });
      } else if (seen.has(name.toLowerCase())) {
        issues.push({ name, message: 'Postmark refuses two names that differ only in case' });
      }
      seen.add(name.toLowerCase());
    }
    return issues;
  }
  if (adapterType === 'mailapi_domain') {
    // mailgun.js leaves every empty form value out: `v:flag=` would never reach Mailgun (review
    // finding, session 16).
    return entries
      .filter(([, value]) => value === '')
      .map(([name]) => ({ name, message: 'Mailgun drops empty values: give the tag a value' }));
  }
  if (adapterType === 'mailapi_b' && entries.length > 0) {
    const bytes = Buffer.byteLength(JSON.stringify(tags));
    if (bytes > SENDGRID_CUSTOM_ARGS_MAX_BYTES) {
      return [
        {
          message: `SendGrid takes at most ${SENDGRID_CUSTOM_ARGS_MAX_BYTES} bytes of tags (custom_args) as JSON; these are ${bytes}`,
        },
      ];
    }
  }
  return [];
}

/**
 * Labels name → value as Postmark Metadata, for an email that reaches Postmark anyway (a fallback
 * adapter, or one accepted before the check): names and values cut to Postmark's lengths, a name
 * equal to an earlier one but for case dropped, at most 10 fields, in the order given.
 */
export function postmarkMetadata(tags: Readonly<Record<string, string>>): Record<string, string> {
  const out: Record<string, string> = {};
  const seen = new Set<string>();
  for (const [rawName, value] of Object.entries(tags)) {
    if (seen.size >= POSTMARK_METADATA.maxFields) break;
    const name = rawName.slice(0, POSTMARK_METADATA.maxNameLength);
    if (seen.has(name.toLowerCase())) continue;
    seen.add(name.toLowerCase());
    out[name] = value.slice(0, POSTMARK_METADATA.maxValueLength);
  }
  return out;
}

/**
 * Labels name → value as SendGrid custom_args, for an email that reaches SendGrid anyway: the tags
 * in the order given while their JSON stays within {@link SENDGRID_CUSTOM_ARGS_MAX_BYTES}; the first
 * that does not fit and all after it are left out.
 */
export function sendgridCustomArgs(tags: Readonly<Record<string, string>>): Record<string, string> {
  const out: Record<string, string> = {};
  let bytes = 2; // {}
  for (const [name, value] of Object.entries(tags)) {
    const entry = Buffer.byteLength(JSON.stringify({ [name]: value })) - 2 + (bytes > 2 ? 1 : 0);
    if (bytes + entry > SENDGRID_CUSTOM_ARGS_MAX_BYTES) break;
    out[name] = value;
    bytes += entry;
  }
  return out;
}

/**
 * Labels as SendGrid categories, Mailgun `o:tag` values or Postmark's one `Tag`, fitted for an
 * email that reaches the provider anyway: at most `max` of them, each cut to `maxLength` characters,
 * and for Mailgun (`ascii`) every non-ASCII character as `_`.
 */
export function fittedLabels(
  labels: readonly string[],
  limits: { max: number; maxLength: number; ascii?: boolean },
): string[] {
  return labels
    .slice(0, limits.max)
    .map((label) => (limits.ascii ? label.replace(/[^\x20-\x7e]/g, '_') : label).slice(0, limits.maxLength));
}

/**
 * The tags of `tags` (name → value) that Amazon SES and Resend would refuse, as the names to
 * report (the accept path answers 400 for them when the adapter is one of those).
 */
export function tagsRefusedByRestrictedProviders(
  tags: Readonly<Record<string, string>> | undefined,
): string[] {
  return Object.entries(tags ?? {})
    .filter(([name, value]) => !RESTRICTED_TAG.test(name) || !RESTRICTED_TAG.test(value))
    .map(([name]) => name);
}

/**
 * `tags` as Amazon SES and Resend accept them (name/value pairs): a label of the list form is a tag
 * named by it with the value {@link LABEL_TAG_VALUE}. For an email that reaches such a provider
 * anyway (a fallback adapter, or an email accepted before the check), every other character becomes
 * `_`, each side is cut to 256 characters (an empty one becomes `_`), and a name that maps onto an
 * earlier one is dropped. The log keeps the tags as sent.
 * @returns `{name, value}` pairs in the order given.
 */
export function restrictedTags(tags: EmailTags | undefined): { name: string; value: string }[] {
  const out = new Map<string, string>();
  const clean = (text: string) => text.replace(/[^A-Za-z0-9_-]/g, '_').slice(0, 256) || '_';
  const pairs = isTagList(tags)
    ? tags.map((label) => [label, LABEL_TAG_VALUE] as const)
    : Object.entries(tags ?? {});
  for (const [name, value] of pairs) {
    const key = clean(name);
    if (!out.has(key)) out.set(key, clean(value));
  }
  return [...out].map(([name, value]) => ({ name, value }));
}
