/**
 * What Amazon SES and Resend accept as a tag's name and value: ASCII letters, digits, `_` and `-`,
 * at most 256 characters (SES API Reference v2 "MessageTag"; Resend API "Send Email", `tags`).
 * Postwright's own `tags` are any header-safe text (SMTP, Mailgun, Postmark and SendGrid take them).
 */
const RESTRICTED_TAG = /^[A-Za-z0-9_-]{1,256}$/;

/** Adapter types whose provider takes only {@link RESTRICTED_TAG} tags. */
export const RESTRICTED_TAG_PROVIDERS: ReadonlySet<string> = new Set(['mailapi_cloud', 'mailapi_a']);

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
