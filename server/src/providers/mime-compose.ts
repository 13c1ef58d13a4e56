import { randomBytes, randomUUID } from 'node:crypto';
import { asciiAddress, parseAddresses } from './mailbox-address.ts';
import type { OutgoingAttachment, OutgoingEmail } from './types.ts';

/**
 * A MIME message composed once, ready for an SMTP transport's `raw` option: the bytes to send
 * after DATA, the Message-ID they carry, and the SMTP envelope.
 */
export interface ComposedMessage {
  /** The whole message (RFC 5322 header + MIME body), CRLF line ends, 7-bit ASCII only. */
  raw: Buffer;
  /** The Message-ID header's value, with angle brackets. */
  messageId: string;
  /**
   * The SMTP envelope: the sender's mailbox and every recipient's (to, cc and bcc, as given:
   * nodemailer extracts and de-duplicates the addresses). Bcc is only here, never in a header.
   */
  envelope: { from: string; to: string[] };
}

/** Longest line of a header field or encoded body we write (RFC 5322 §2.1.1 recommends 78). */
const LINE = 76;
/** Longest line a body part may keep as `7bit` (RFC 5322 §2.1.1: 998 plus CRLF). */
const MAX_7BIT_LINE = 998;

/** Per process: boundaries are this random prefix and a counter (unique, no entropy per message). */
const BOUNDARY_PREFIX = `--_Pw-${randomBytes(8).toString('hex')}-`;
let boundaryCounter = 0;

/** True when `value` holds only printable US-ASCII, space and tab. */
function isPlainAscii(value: string): boolean {
  for (let i = 0; i < value.length; i++) {
    const code = value.charCodeAt(i);
    if (code > 0x7e || (code < 0x20 && code !== 0x09)) return false;
  }
  return true;
}

/**
 * RFC 2047 encoded words (`=?UTF-8?B?…?=`, base64) for `text`, each at most 75 characters and
 * never splitting a UTF-8 character, joined by a folding space.
 */
function encodeWords(text: string): string {
  // 39 bytes of UTF-8 → 52 base64 characters + 12 for the `=?UTF-8?B?` `?=` wrapper: 64 ≤ 75,
  // short enough that `Subject: ` and the first word fit in 76.
  const bytes = Buffer.from(text, 'utf8');
  const words: string[] = [];
  let start = 0;
  while (start < bytes.length) {
    let end = Math.min(start + 39, bytes.length);
    // Back off to the start of a UTF-8 character (continuation bytes are 10xxxxxx).
    while (end < bytes.length && end > start && (bytes[end]! & 0xc0) === 0x80) end--;
    words.push(`=?UTF-8?B?${bytes.toString('base64', start, end)}?=`);
    start = end;
  }
  return words.join(' ');
}

/**
 * One header field, `Name: value\r\n`, folded at spaces so that lines stay within {@link LINE}
 * characters where possible (RFC 5322 §2.2.3; a word longer than a line stays whole, up to 998).
 */
function headerLine(name: string, value: string): string {
  const line = `${name}: ${value}`;
  if (line.length <= LINE) return `${line}\r\n`;
  let out = '';
  let rest = line;
  // The first fold comes after the field name, its colon and the first word of the value.
  let minimum = name.length + 2;
  while (rest.length > LINE) {
    let cut = rest.lastIndexOf(' ', LINE);
    if (cut < minimum) cut = rest.indexOf(' ', Math.max(LINE, minimum));
    if (cut < minimum) break;
    out += `${rest.slice(0, cut)}\r\n`;
    rest = rest.slice(cut);
    minimum = 1;
  }
  return `${out}${rest}\r\n`;
}

/**
 * An unstructured header value (Subject, custom fields): as is when it is printable ASCII (folded at
 * spaces only, so URLs in e.g. List-Unsubscribe stay whole), else RFC 2047 encoded words. CR and LF become spaces (validation refuses
 * them already; this keeps a header from ever being split into two).
 */
function unstructured(value: string): string {
  const clean = value.replace(/\r\n?|\n/g, ' ');
  // ASCII that looks like an encoded word is encoded too, so a client shows it as it was written;
  // so is ASCII with a word no fold can bring under 998 characters a line (RFC 5322 §2.1.1 MUST:
  // a subject rendered from a 3,000-letter variable was one line of 3,009; review, session 13).
  return isPlainAscii(clean) && !clean.includes('=?') && !hasUnfoldableWord(clean)
    ? clean
    : encodeWords(clean);
}

/**
 * Longest run of non-blank characters a header value keeps as is: with the longest standard field
 * name in front it still fits the 998 characters of a line (RFC 5322 §2.1.1).
 */
const MAX_HEADER_WORD = 900;

/** True when `value` holds a run of more than {@link MAX_HEADER_WORD} characters without a space or tab. */
function hasUnfoldableWord(value: string): boolean {
  let run = 0;
  for (let i = 0; i < value.length; i++) {
    const code = value.charCodeAt(i);
    run = code === 0x20 || code === 0x09 ? 0 : run + 1;
    if (run > MAX_HEADER_WORD) return true;
  }
  return false;
}

/** Characters of a display name that can stay an atom sequence (RFC 5322 §3.2.3 atext and spaces). */
const PHRASE_ATOMS = /^[A-Za-z0-9!#$%&'*+\-/=?^_`{|}~ ]*$/;

/** A display name as an RFC 5322 phrase: atoms as is, else a quoted string, else encoded words. */
function displayName(name: string): string {
  const clean = name.replace(/\r\n?|\n/g, ' ').trim();
  if (hasUnfoldableWord(clean)) return encodeWords(clean);
  if (PHRASE_ATOMS.test(clean) && !clean.includes('=?')) return clean;
  if (isPlainAscii(clean)) return `"${clean.replace(/[\\"]/g, '\\$&')}"`;
  return encodeWords(clean);
}

/**
 * An address-list header value from mailbox strings (`a@b.c` or `Name <a@b.c>`; parsed with
 * nodemailer's addressparser, as validation does): `Name <a@b.c>, d@e.f`.
 */
function addressList(mailboxes: string[]): string {
  const out: string[] = [];
  for (const mailbox of mailboxes) {
    for (const entry of parseAddresses(mailbox)) {
      if ('group' in entry) continue;
      const address = asciiAddress(entry.address);
      out.push(entry.name ? `${displayName(entry.name)} <${address}>` : address);
    }
  }
  return out.join(', ');
}

/** `addr-spec`'s domain of the sender, for a generated Message-ID. */
function senderDomain(from: string): string {
  const [entry] = parseAddresses(from);
  const address = (entry && 'address' in entry ? entry.address : undefined) ?? '';
  const at = address.lastIndexOf('@');
  return at >= 0 ? asciiAddress(address).slice(at + 1) || 'localhost' : 'localhost';
}

/** RFC 5322 §3.3 date-time in UTC: `Mon, 23 Nov 2026 17:30:52 +0000`. */
function rfc5322Date(date: Date): string {
  return date.toUTCString().replace(/GMT$/, '+0000');
}

/** `text` as lines of at most {@link LINE} base64 characters, CRLF after each. */
function base64Lines(content: Buffer): string {
  const encoded = content.toString('base64');
  let out = '';
  for (let i = 0; i < encoded.length; i += LINE) out += `${encoded.slice(i, i + LINE)}\r\n`;
  return out;
}

/** Hex digits of quoted-printable escapes (RFC 2045 §6.7: upper case). */
const HEX = '0123456789ABCDEF';

/**
 * Quoted-printable (RFC 2045 §6.7) of UTF-8 `text`, lines of at most 76 characters: line breaks
 * (LF, CRLF or CR) become CRLF, `=`, controls, bytes above 0x7E and a space or tab before a line
 * end are escaped, long lines get soft breaks (`=` CRLF), never inside an escape. A `.` opening
 * a line is escaped too (robust against relays that do not dot-stuff).
 */
export function quotedPrintable(text: string): string {
  const bytes = Buffer.from(text, 'utf8');
  const out = Buffer.allocUnsafe(bytes.length * 3 + Math.ceil(bytes.length / 25) * 3 + 2);
  let o = 0;
  let column = 0;
  const n = bytes.length;
  for (let i = 0; i < n; i++) {
    const byte = bytes[i]!;
    if (byte === 0x0d || byte === 0x0a) {
      if (byte === 0x0d && bytes[i + 1] === 0x0a) i++;
      out[o++] = 0x0d;
      out[o++] = 0x0a;
      column = 0;
      continue;
    }
    const next = bytes[i + 1];
    const atLineEnd = next === undefined || next === 0x0d || next === 0x0a;
    const printable =
      (byte >= 0x21 && byte <= 0x7e && byte !== 0x3d) || ((byte === 0x20 || byte === 0x09) && !atLineEnd);
    // Room for this character and, unless the line ends right after it, a soft break's `=`.
    if (column + (printable ? 1 : 3) > (atLineEnd ? LINE : LINE - 1)) {
      out[o++] = 0x3d;
      out[o++] = 0x0d;
      out[o++] = 0x0a;
      column = 0;
    }
    if (printable && !(byte === 0x2e && column === 0)) {
      out[o++] = byte;
      column++;
    } else {
      out[o++] = 0x3d;
      out[o++] = HEX.charCodeAt(byte >> 4);
      out[o++] = HEX.charCodeAt(byte & 15);
      column += 3;
    }
  }
  return out.toString('latin1', 0, o);
}

/**
 * A text part's transfer encoding and body: `7bit` with CRLF line ends when `text` is printable
 * ASCII with lines of at most 998 characters and no line opening with `.`; else quoted-printable.
 */
function textBody(text: string): { encoding: string; body: string } {
  let column = 0;
  let plain = true;
  for (let i = 0; i < text.length; i++) {
    const code = text.charCodeAt(i);
    if (code === 0x0a || code === 0x0d) {
      column = 0;
      continue;
    }
    if (
      code > 0x7e ||
      (code < 0x20 && code !== 0x09) ||
      ++column > MAX_7BIT_LINE ||
      (code === 0x2e && column === 1)
    ) {
      plain = false;
      break;
    }
  }
  if (plain) return { encoding: '7bit', body: text.replace(/\r\n?|\n/g, '\r\n') };
  return { encoding: 'quoted-printable', body: quotedPrintable(text) };
}

/**
 * A MIME parameter (RFC 2045 §5.1): `key=value` for a token, `key="value"` for other short ASCII,
 * else RFC 2231 extended (`key*=utf-8''…`, continued as `key*0*`, `key*1*` when long).
 */
function mimeParameter(key: string, value: string): string {
  if (value.length <= 60 && /^[!#$%&'*+\-.^_`|~0-9A-Za-z{}]+$/.test(value)) return `${key}=${value}`;
  if (isPlainAscii(value) && !/[\\"]/.test(value) && value.length <= 60) return `${key}="${value}"`;
  const encoded = encodeURIComponent(value).replace(
    /['()*!]/g,
    (c) => `%${c.charCodeAt(0).toString(16).toUpperCase()}`,
  );
  const chunks: string[] = [];
  let start = 0;
  while (start < encoded.length) {
    let end = Math.min(start + 50, encoded.length);
    // Never split a %XX escape.
    if (encoded[end - 1] === '%') end -= 1;
    else if (encoded[end - 2] === '%') end -= 2;
    chunks.push(encoded.slice(start, end));
    start = end;
  }
  if (chunks.length === 1) return `${key}*=utf-8''${chunks[0]}`;
  return chunks.map((chunk, i) => `${key}*${i}*=${i === 0 ? "utf-8''" : ''}${chunk}`).join(';\r\n ');
}

/** A text part (`text/plain` or `text/html`, UTF-8) with its headers. */
function textPart(type: string, text: string): string {
  const { encoding, body } = textBody(text);
  return `Content-Type: ${type}; charset=utf-8\r\nContent-Transfer-Encoding: ${encoding}\r\n\r\n${body}`;
}

/** A header of one value and one parameter, on one line when it fits, else folded before the parameter. */
function withParameter(name: string, value: string, parameter: string): string {
  const line = `${name}: ${value}; ${parameter}`;
  return line.length <= LINE ? `${line}\r\n` : `${name}: ${value};\r\n ${parameter}\r\n`;
}

/** An attachment part: its type with `name`, base64 body, `Content-Disposition: attachment` with `filename`. */
function attachmentPart(attachment: OutgoingAttachment): string {
  const type = /^[\w.+-]+\/[\w.+-]+$/.test(attachment.contentType)
    ? attachment.contentType
    : 'application/octet-stream';
  return (
    withParameter('Content-Type', type, mimeParameter('name', attachment.filename)) +
    'Content-Transfer-Encoding: base64\r\n' +
    withParameter('Content-Disposition', 'attachment', mimeParameter('filename', attachment.filename)) +
    `\r\n${base64Lines(attachment.content)}`
  );
}

/** A multipart entity (its Content-Type header, blank line and the parts between boundaries). */
function multipart(subtype: string, parts: string[]): string {
  const boundary = `${BOUNDARY_PREFIX}${++boundaryCounter}`;
  let out = `Content-Type: multipart/${subtype};\r\n boundary="${boundary}"\r\n\r\n`;
  for (const part of parts) out += `--${boundary}\r\n${part}${part.endsWith('\r\n') ? '' : '\r\n'}`;
  return `${out}--${boundary}--\r\n`;
}

/**
 * Composes `email` into one MIME message, as nodemailer's MailComposer would for the same
 * options (server/test/mime-compose.test.ts compares the two through mailparser), in one pass and
 * without streams: From, To, Cc, Reply-To, Subject, Message-ID (`email.messageId`, else a UUID at
 * the sender's domain), Date, MIME-Version, then the custom headers; the body is
 * `multipart/alternative` (text, HTML) — or the HTML alone when the text is empty — inside
 * `multipart/mixed` when there are attachments. Non-ASCII in headers uses RFC 2047 encoded words
 * (display names, Subject, custom values) and RFC 2231 parameters (file names); text parts are
 * `7bit` when they can be, else quoted-printable; attachments base64. Bcc is never written
 * (envelope only). The output is 7-bit ASCII, so no SMTP extension (8BITMIME, SMTPUTF8) is needed.
 * Header names and values are taken as validated by the send fields (send-fields.schema.ts, and
 * isHeaderText of mailbox-address.ts: no control characters; reserved names refused).
 */
export function composeMessage(email: OutgoingEmail, now: Date = new Date()): ComposedMessage {
  const messageId = email.messageId
    ? email.messageId.startsWith('<')
      ? email.messageId
      : `<${email.messageId}>`
    : `<${randomUUID()}@${senderDomain(email.from)}>`;
  let head = headerLine('From', addressList([email.from]));
  if (email.to.length) head += headerLine('To', addressList(email.to));
  if (email.cc?.length) head += headerLine('Cc', addressList(email.cc));
  if (email.replyTo?.length) head += headerLine('Reply-To', addressList(email.replyTo));
  head += headerLine('Subject', unstructured(email.subject));
  head += `Message-ID: ${messageId}\r\nDate: ${rfc5322Date(now)}\r\nMIME-Version: 1.0\r\n`;
  if (email.headers) {
    for (const name of Object.keys(email.headers))
      head += headerLine(name, unstructured(email.headers[name]!));
  }
  const alternatives: string[] = [];
  if (email.text) alternatives.push(textPart('text/plain', email.text));
  if (email.html || alternatives.length === 0) alternatives.push(textPart('text/html', email.html));
  const content = alternatives.length > 1 ? multipart('alternative', alternatives) : alternatives[0]!;
  const body = email.attachments?.length
    ? multipart('mixed', [content, ...email.attachments.map(attachmentPart)])
    : content;
  return {
    // ASCII by construction; UTF-8 keeps an unexpected non-ASCII address intact rather than mangled.
    raw: Buffer.from(head + body, 'utf8'),
    messageId,
    envelope: { from: email.from, to: [...email.to, ...(email.cc ?? []), ...(email.bcc ?? [])] },
  };
}
