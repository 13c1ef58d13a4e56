import { domainToASCII } from 'node:url';
import { LRUCache } from 'lru-cache';
import addressparser from 'nodemailer/lib/addressparser';
import { z } from 'zod';

const plainAddress = z.email();

/** What nodemailer's addressparser reads from a string: mailboxes and groups, in order. */
export type ParsedAddresses = readonly Readonly<addressparser.AddressOrGroup>[];

/** Distinct strings whose parse is kept, and the longest string kept (a mailbox is at most ~1 KB). */
const PARSED_CACHE_ENTRIES = 4_096;
const PARSED_CACHE_MAX_LENGTH = 1_024;
/** Characters of kept strings at most (UTF-16 code units): with one mailbox each, about 1 MB of memory. */
const PARSED_CACHE_MAX_CHARACTERS = 256 * 1024;
const parsedCache = new LRUCache<string, ParsedAddresses>({
  max: PARSED_CACHE_ENTRIES,
  maxSize: PARSED_CACHE_MAX_CHARACTERS,
  sizeCalculation: (_parsed, value) => value.length + 1,
});

/** Freezes a parse (and its groups' members), so the entries the cache hands out cannot be changed. */
function frozen(entries: addressparser.AddressOrGroup[]): ParsedAddresses {
  for (const entry of entries) {
    if ('group' in entry && entry.group) frozen(entry.group);
    Object.freeze(entry);
  }
  return Object.freeze(entries);
}

/**
 * nodemailer's addressparser of `value` (mailboxes and groups). Strings that hold exactly one
 * mailbox are remembered: the last {@link PARSED_CACHE_ENTRIES} distinct ones of at most
 * {@link PARSED_CACHE_MAX_LENGTH} characters, {@link PARSED_CACHE_MAX_CHARACTERS} in all. The same
 * few strings are parsed again and again: a sender's From for every email it sends (validated at
 * accept, then twice in the message's head and once for its Message-ID domain), each recipient for
 * validation, its suppression key and its header (bench:send, session 21: about 45 µs of the
 * worker's CPU per email). Lists and groups are not kept: no caller sends them, and a client's
 * `a,a,a,…` parses into a hundred entries (review finding, session 21: 4,096 such strings held
 * ~38 MB). The result is frozen: read it, never change it.
 */
export function parseAddresses(value: string): ParsedAddresses {
  const cached = parsedCache.get(value);
  if (cached) return cached;
  const parsed = frozen(addressparser(value));
  const single = parsed.length === 1 && !('group' in parsed[0]!);
  if (single && value.length <= PARSED_CACHE_MAX_LENGTH) parsedCache.set(value, parsed);
  return parsed;
}

/**
 * True when `value` may stand in a header field body (RFC 5322 §2.2: printable characters and
 * white space) once encoded: no C0 control character but tab (U+0000–U+0008, U+000A–U+001F), no
 * DEL (U+007F), no C1 control character (U+0080–U+009F, e.g. U+0085 NEL) and no Unicode line or
 * paragraph separator (U+2028, U+2029), which some readers take as line breaks. Other Unicode
 * (accents, CJK, emoji) is fine: it is MIME-encoded (RFC 2047). The one check every value that
 * becomes a header goes through (addresses here; subject, headers, tags and attachment file names in
 * modules/emails/send-fields.ts).
 */
export function isHeaderText(value: string): boolean {
  for (let i = 0; i < value.length; i++) {
    const code = value.charCodeAt(i);
    if (
      (code < 0x20 && code !== 0x09) ||
      (code >= 0x7f && code <= 0x9f) ||
      code === 0x2028 ||
      code === 0x2029
    ) {
      return false;
    }
  }
  return true;
}

/** The validation message for a value {@link isHeaderText} refuses. */
export const HEADER_TEXT_MESSAGE =
  'must not contain CR, LF or other control characters (C0 but tab, DEL, C1, U+2028, U+2029): it becomes a header';

/**
 * True when `value` is one mailbox (RFC 5322 §3.4): `user@example.com` or
 * `Display Name <user@example.com>`, with a syntactically valid address and no group or list.
 * Parsing is nodemailer's addressparser; the address check is zod's email rule. Refuses control
 * characters anywhere, display name included ({@link isHeaderText}).
 */
export function isMailbox(value: string): boolean {
  if (!isHeaderText(value)) return false;
  const parsed = parseAddresses(value);
  if (parsed.length !== 1) return false;
  const [entry] = parsed;
  if (!entry || 'group' in entry) return false;
  return plainAddress.safeParse(entry.address).success && withinSmtpLimits(entry.address);
}

/**
 * True when `address` (`local@domain`) fits SMTP's size limits (RFC 5321 §4.5.3.1): a local part
 * of at most 64 octets, a domain of at most 255 and a path (the address in its angle brackets) of
 * at most 256, so the address itself at most 254. zod's email rule checks none of them: a
 * 300-character local part was accepted and refused by every server and provider at send (review
 * finding, session 18).
 */
function withinSmtpLimits(address: string): boolean {
  const at = address.lastIndexOf('@');
  return (
    Buffer.byteLength(address) <= 254 &&
    Buffer.byteLength(address.slice(0, at)) <= 64 &&
    Buffer.byteLength(address.slice(at + 1)) <= 255
  );
}

/** The bare address of a mailbox (`user@example.com` from `Name <user@example.com>`), lower-cased domain. */
export function mailboxAddress(value: string): string {
  const [entry] = parseAddresses(value);
  const address = (entry && 'address' in entry ? entry.address : undefined) ?? value;
  const at = address.lastIndexOf('@');
  return at < 0 ? address : `${address.slice(0, at)}@${address.slice(at + 1).toLowerCase()}`;
}

/**
 * `value` (one mailbox, as {@link isMailbox} accepts it) rebuilt from what validation read, for a
 * provider API that takes mailboxes as strings (Resend, Mailgun, Postmark): `user@example.com`, or
 * `"Display Name" <user@example.com>` with the name a quoted string (RFC 5322 §3.2.4: `\` and `"`
 * escaped). Validation parses with nodemailer's addressparser, which reads `a@x.com b@y.com`,
 * `<a@x.com> b@y.com` or `Name (c, b@y.com) <a@x.com>` as one mailbox; a provider's own parser
 * may read such a string as two, sending to an address no recipient limit or suppression check
 * saw (review finding, session 14). Rebuilt, each provider reads the one address Postwright
 * checked. The name stays as written (Unicode included: these APIs take UTF-8 JSON or form data
 * and encode headers themselves). A value addressparser finds no mailbox in is returned as it is
 * (validation refuses it before it gets here).
 */
export function forwardedMailbox(value: string): string {
  const [entry] = parseAddresses(value);
  if (!entry || 'group' in entry || !entry.address) return value;
  const name = entry.name.trim();
  if (!name) return entry.address;
  // Encoded words (RFC 2047) stay unquoted: inside a quoted string they are not decoded (§5). Their
  // characters (§5 (3)) hold no quote, comma, bracket or @, so they cannot make a second address.
  if (ENCODED_WORDS.test(name)) return `${name} <${entry.address}>`;
  return `"${name.replace(/[\\"]/g, '\\$&')}" <${entry.address}>`;
}

/** A display name made of RFC 2047 encoded words only (`=?charset?B|Q?text?=`, space-separated). */
const ENCODED_WORDS =
  /^=\?[A-Za-z0-9_-]+\?[BbQq]\?[A-Za-z0-9!*+\-/=_]*\?=(?:\s+=\?[A-Za-z0-9_-]+\?[BbQq]\?[A-Za-z0-9!*+\-/=_]*\?=)*$/;

/**
 * The bare address of one mailbox as an SMTP envelope takes it (Amazon SES's `Destination` and
 * `FromEmailAddress` with raw content: names and Unicode domains are refused there, the names
 * travel in the raw message's headers): `user@example.com`, the domain in ASCII (IDNA, as
 * nodemailer does), lower-cased.
 */
export function envelopeAddress(value: string): string {
  return asciiAddress(mailboxAddress(value));
}

/** `address` (`local@domain`) with its domain in ASCII (IDNA, as nodemailer does); the local part as given. */
export function asciiAddress(address: string): string {
  const at = address.lastIndexOf('@');
  if (at < 0) return address;
  const domain = address.slice(at + 1);
  // biome-ignore lint/suspicious/noControlCharactersInRegex: the ASCII range, control characters included
  if (/^[\x00-\x7f]*$/.test(domain)) return address;
  return `${address.slice(0, at)}@${domainToASCII(domain) || domain}`;
}

/** zod schema for a single mailbox string (see {@link isMailbox}); control characters get their own message. */
export const mailboxSchema = z
  .string()
  .trim()
  .min(3)
  .max(320)
  .refine(isHeaderText, { message: HEADER_TEXT_MESSAGE, abort: true })
  .refine(isMailbox, 'must be an email address, optionally with a display name ("Name <user@example.com>")');
