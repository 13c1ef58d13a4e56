/**
 * What Amazon SES and Resend accept as a tag's name and value: ASCII letters, digits, `_` and `-`,
 * at most 256 characters (SES API Reference v2 "MessageTag"; Resend API "Send Email", `tags`).
 * Postwright's own `tags` are any header-safe text (SMTP, Mailgun, Postmark and SendGrid take them).
 */
const RESTRICTED_TAG = /^[A-Za-z0-9_-]{1,256}$/;

/** Adapter types whose provider takes only {@link RESTRICTED_TAG} tags. */
export const RESTRICTED_TAG_PROVIDERS: ReadonlySet<string> = new Set(['mailapi_cloud', 'mailapi_a']);

/**
 * Postmark's Metadata limits (Postmark, "Email API" → Metadata and "Custom metadata FAQ"): at most
 * 10 fields, names of at most 20 characters, values of at most 80, and no two names that differ only
 * in case ('a_key' and 'A_Key' are refused over the API).
 */
export const POSTMARK_METADATA = { maxFields: 10, maxNameLength: 20, maxValueLength: 80 } as const;

/** SendGrid's bound on `custom_args` (Mail Send v3: "Total custom args size may not exceed 10,000 bytes"), as JSON bytes. */
export const SENDGRID_CUSTOM_ARGS_MAX_BYTES = 10_000;

/** One tag problem to report at accept: `name` undefined = the tags as a whole. */
export interface ProviderTagIssue {
  name?: string | undefined;
  message: string;
}

/**
 * What the provider of `adapterType` would refuse in `tags` at delivery (review findings, sessions
 * 13 and 16), for the accept path to answer 400 instead of accepting an email bound to fail:
 * Amazon SES and Resend ({@link RESTRICTED_TAG}), Postmark ({@link POSTMARK_METADATA}), SendGrid
 * ({@link SENDGRID_CUSTOM_ARGS_MAX_BYTES}). SMTP sends no tags; Mailgun's `v:` variables take any text.
 * @returns the issues, none when the provider takes them all.
 */
export function providerTagIssues(
  adapterType: string,
  tags: Readonly<Record<string, string>> | undefined,
): ProviderTagIssue[] {
  const entries = Object.entries(tags ?? {});
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
 * `tags` as Postmark Metadata, for an email that reaches Postmark anyway (a fallback adapter, or one
 * accepted before the check): names and values cut to Postmark's lengths, a name equal to an earlier
 * one but for case dropped, at most 10 fields, in the order given.
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
 * `tags` as SendGrid custom_args, for an email that reaches SendGrid anyway: the tags in the order
 * given while their JSON stays within {@link SENDGRID_CUSTOM_ARGS_MAX_BYTES}; the first that does
 * not fit and all after it are left out.
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
 * `tags` as Amazon SES and Resend accept them, for an email that reaches such a provider anyway (a
 * fallback adapter, or an email accepted before the check): every other character becomes `_`,
 * each side is cut to 256 characters (an empty one becomes `_`), and a name that maps onto an
 * earlier one is dropped. The log keeps the tags as sent.
 * @returns `{name, value}` pairs in the order given.
 */
export function restrictedTags(
  tags: Readonly<Record<string, string>> | undefined,
): { name: string; value: string }[] {
  const out = new Map<string, string>();
  const clean = (text: string) => text.replace(/[^A-Za-z0-9_-]/g, '_').slice(0, 256) || '_';
  for (const [name, value] of Object.entries(tags ?? {})) {
    const key = clean(name);
    if (!out.has(key)) out.set(key, clean(value));
  }
  return [...out].map(([name, value]) => ({ name, value }));
}
