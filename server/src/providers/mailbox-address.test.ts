import addressparser from 'nodemailer/lib/addressparser';
import { describe, expect, it } from 'vitest';
import {
  envelopeAddress,
  forwardedMailbox,
  isHeaderText,
  isMailbox,
  mailboxSchema,
  parseAddresses,
} from './mailbox-address.ts';

/** The one check for text that becomes a header (RFC 5322 §2.2), and mailboxes built on it. */

const CONTROLS: [string, string][] = [
  ['NUL', '\u0000'],
  ['LF', '\n'],
  ['CR', '\r'],
  ['VT', '\u000b'],
  ['ESC', '\u001b'],
  ['DEL', '\u007f'],
  ['C1 U+0080', '\u0080'],
  ['NEL U+0085', '\u0085'],
  ['C1 U+009F', '\u009f'],
  ['LINE SEPARATOR U+2028', '\u2028'],
  ['PARAGRAPH SEPARATOR U+2029', '\u2029'],
];

const UNICODE = ['Zoë Ångström', '山田 太郎', 'Ünïcødé 🚀', 'tab\tinside', 'non\u00a0breaking', 'Ÿ ÿ ¡'];

describe('isHeaderText', () => {
  it.each(CONTROLS)('refuses %s', (_name, character) => {
    expect(isHeaderText(`a${character}b`)).toBe(false);
  });

  it.each(UNICODE)('accepts %j', (text) => {
    expect(isHeaderText(text)).toBe(true);
  });
});

describe('isMailbox', () => {
  it.each(CONTROLS)('refuses %s in the display name', (_name, character) => {
    expect(isMailbox(`Ada${character}Lovelace <ada@example.test>`)).toBe(false);
  });

  it.each(UNICODE)('accepts the display name %j', (name) => {
    expect(isMailbox(`"${name}" <ada@example.test>`)).toBe(true);
  });

  it('refuses an address past SMTP’s size limits: local part 64 octets, address 254 (RFC 5321 §4.5.3.1)', () => {
    const domain = 'example.test';
    expect(isMailbox(`${'a'.repeat(64)}@${domain}`)).toBe(true);
    expect(isMailbox(`${'a'.repeat(65)}@${domain}`)).toBe(false);
    expect(isMailbox(`Ada <${'a'.repeat(300)}@${domain}>`)).toBe(false);
    const longDomain = `${Array.from({ length: 4 }, () => 'd'.repeat(60)).join('.')}.test`; // 248
    expect(isMailbox(`abcde@${longDomain}`)).toBe(true); // 254
    expect(isMailbox(`abcdef@${longDomain}`)).toBe(false); // 255
  });

  it('gives control characters their own message in the schema', () => {
    const result = mailboxSchema.safeParse('Ada\u0085 <ada@example.test>');
    expect(result.success).toBe(false);
    expect(result.error?.issues.map((issue) => issue.message)).toEqual([
      expect.stringContaining('control characters'),
    ]);
  });
});

describe('mailboxes forwarded to providers', () => {
  it('rebuilds each accepted mailbox as its one address, with the rest a quoted name', () => {
    for (const [typed, forwarded] of [
      ['ada@example.com', 'ada@example.com'],
      ['Ada Lovelace <ada@example.com>', '"Ada Lovelace" <ada@example.com>'],
      ['ada@example.com bob@evil.test', '"bob@evil.test" <ada@example.com>'],
      ['<ada@example.com> bob@evil.test', '"bob@evil.test" <ada@example.com>'],
      ['Ada (x, bob@evil.test) <ada@example.com>', '"Ada" <ada@example.com>'],
      ['"Doe, Jöhn" <john@example.com>', '"Doe, Jöhn" <john@example.com>'],
      // Encoded words stay unquoted (quoted, RFC 2047 §5 has them shown as typed).
      ['=?utf-8?q?J=C3=B6hn?= <john@example.com>', '=?utf-8?q?J=C3=B6hn?= <john@example.com>'],
      ['=?utf-8?q?a@b?= <john@example.com>', '"=?utf-8?q?a@b?=" <john@example.com>'],
      ['"a \\"b\\" c" <a@example.com>', '"a \\"b\\" c" <a@example.com>'],
    ]) {
      expect(isMailbox(typed!), typed).toBe(true);
      expect(forwardedMailbox(typed!), typed).toBe(forwarded);
    }
  });

  it('gives the envelope the bare address with an ASCII domain', () => {
    expect(envelopeAddress('"Doe, Jöhn" <john@Exämple.COM>')).toBe('john@xn--exmple-cua.com');
    expect(envelopeAddress('ada@example.com bob@evil.test')).toBe('ada@example.com');
  });
});

describe('parseAddresses', () => {
  it("gives addressparser's reading, frozen; kept only for one mailbox of at most 1,024 characters", () => {
    for (const value of ['Ada <ada@example.test>', '"Q, R" <q@x.test>']) {
      const first = parseAddresses(value);
      expect(first).toEqual(addressparser(value));
      expect(parseAddresses(value)).toBe(first);
      expect(Object.isFrozen(first) && first.every((entry) => Object.isFrozen(entry))).toBe(true);
    }
    // Lists and groups (review finding, session 21: `a,a,a,…` held ~9 KB per string) and long strings.
    const long = `${'n'.repeat(1_100)} <long@example.test>`;
    for (const value of ['a@x.test, Team: b@y.test, c@z.test;', 'a,'.repeat(150), 'Team: b@y.test;', long]) {
      const first = parseAddresses(value);
      expect(first).toEqual(addressparser(value));
      expect(Object.isFrozen(first)).toBe(true);
      expect(parseAddresses(value)).not.toBe(first);
    }
    const group = parseAddresses('Team: b@y.test, c@z.test;')[0]!;
    expect('group' in group && Object.isFrozen(group.group)).toBe(true);
  });
});
