import { type AddressObject, type ParsedMail, simpleParser } from 'mailparser';
import MailComposer from 'nodemailer/lib/mail-composer';
import { describe, expect, it } from 'vitest';
import { composeMessage, quotedPrintable } from './mime-compose.ts';
import { mimeMessageOptions } from './mime-message.ts';
import type { OutgoingEmail } from './types.ts';

/** RFC 2047 encoded words (B or Q, UTF-8) of a header value decoded, as a mail client shows them. */
function decodeWords(value: string): string {
  return value
    .replace(/\?=\s+=\?/g, '?==?')
    .replace(/=\?UTF-8\?([BQ])\?([^?]*)\?=/gi, (_, kind: string, data: string) =>
      kind.toUpperCase() === 'B'
        ? Buffer.from(data, 'base64').toString('utf8')
        : Buffer.from(
            data
              .replace(/_/g, ' ')
              .replace(/=([0-9A-F]{2})/gi, (_h, hex: string) => String.fromCharCode(parseInt(hex, 16))),
            'latin1',
          ).toString('utf8'),
    );
}

/** What a mail client sees of a parsed message: the fields both composers must agree on. */
function visible(mail: ParsedMail) {
  const addresses = (value: AddressObject | AddressObject[] | undefined) =>
    (Array.isArray(value) ? value : value ? [value] : []).flatMap((group) =>
      group.value.map((entry) => ({ name: entry.name, address: entry.address })),
    );
  return {
    from: addresses(mail.from),
    to: addresses(mail.to),
    cc: addresses(mail.cc),
    replyTo: addresses(mail.replyTo),
    bcc: addresses(mail.bcc),
    subject: mail.subject,
    messageId: mail.messageId,
    // A single-part body's last line break is the message's, not the part's (nodemailer adds one).
    text: mail.text?.replace(/\n$/, ''),
    html: typeof mail.html === 'string' ? mail.html.replace(/\n$/, '') : mail.html,
    custom: [...mail.headers.entries()]
      .filter(([key]) => key.startsWith('x-') || key === 'list-unsubscribe')
      .map(([key, value]) => [key, decodeWords(String(value))])
      .sort(),
    attachments: mail.attachments.map((a) => ({
      filename: a.filename,
      contentType: a.contentType,
      content: a.content.toString('base64'),
    })),
  };
}

/** The same email through nodemailer's MailComposer (what the SMTP provider sent before). */
async function nodemailerMessage(email: OutgoingEmail): Promise<Buffer> {
  return new MailComposer(mimeMessageOptions(email)).compile().build();
}

const longLine = `${'Lorem ipsum dolor sit amet, '.repeat(60)}end`;
const samples: Record<string, OutgoingEmail> = {
  plain: {
    from: 'sender@example.com',
    to: ['user@example.com'],
    subject: 'Hello',
    html: '<p>Hello</p>',
    text: 'Hello',
    messageId: '<eml_1@postwright.test>',
  },
  everything: {
    from: '"Ünïcode, Sender" <sender@example.com>',
    to: ['"Doe, Jane" <jane@example.com>', 'plain@example.com', 'Zoë Ørsted <zoe@example.com>'],
    cc: ['"Quote \\"me\\"" <quote@example.com>', 'cc@example.com'],
    bcc: ['hidden@example.com', 'Secret Name <secret@example.com>'],
    replyTo: ['Support Team <support@example.com>'],
    subject: `Grüße aus Köln — ${'a long subject that goes on '.repeat(6)}🎉`,
    html: `<html><body><p>${longLine}</p><p>Ünïcødé ✓ and = signs and trailing space </p>\n.dot line\n<p>${'x'.repeat(300)}</p></body></html>`,
    text: `Line one\nÜnïcødé ✓ text = sign\n${longLine}\n.starts with a dot\ntrailing space \nend`,
    headers: {
      'X-Postwright-Email-Id': 'eml_abc',
      'X-Custom': 'välue with ümlauts',
      'List-Unsubscribe': `<https://example.com/unsubscribe/${'t'.repeat(120)}>`,
    },
    attachments: [
      { filename: 'report.pdf', contentType: 'application/pdf', content: Buffer.from('%PDF-1.4 fake') },
      {
        filename: `Rëport (final) ${'long '.repeat(20)}.csv`,
        contentType: 'text/csv',
        content: Buffer.from(Array.from({ length: 3000 }, (_, i) => i % 256)),
      },
    ],
  },
  crlfText: {
    from: 'Sender <sender@example.com>',
    to: ['user@example.com'],
    subject: 'Line ends',
    html: '<p>a</p>\r\n<p>b</p>\n<p>c</p>',
    text: 'a\r\nb\nc\n\nd',
  },
  noText: {
    from: 'sender@example.com',
    to: ['user@example.com'],
    subject: 'HTML only',
    html: '<p>only html</p>',
    text: '',
  },
};

describe('composeMessage', () => {
  for (const [name, email] of Object.entries(samples)) {
    it(`reads like nodemailer's MailComposer for the same email (${name})`, async () => {
      const ours = composeMessage(email);
      const theirs = await nodemailerMessage(email);
      const [parsedOurs, parsedTheirs] = await Promise.all([simpleParser(ours.raw), simpleParser(theirs)]);
      const expected = visible(parsedTheirs);
      const actual = visible(parsedOurs);
      if (!email.messageId) {
        // Both generate one at the sender's domain.
        expect(actual.messageId).toMatch(/^<[0-9a-f-]{36}@example\.com>$/);
        actual.messageId = expected.messageId;
      }
      expect(actual).toEqual(expected);
      expect(actual.bcc).toEqual([]);
      expect(parsedOurs.date?.getTime()).toBeGreaterThan(Date.now() - 60_000);
    });
  }

  it('never lets a line break in a subject, name, header value or file name start a header of its own', async () => {
    const { raw } = composeMessage({
      from: 'Evil\r\nBcc: a@evil.example <sender@example.com>',
      to: ['user@example.com'],
      subject: 'Hi\r\nBcc: b@evil.example\nX-Injected: 1',
      html: '<p>x</p>',
      text: 'x',
      headers: { 'X-Note': 'ok\r\nBcc: c@evil.example' },
      attachments: [
        { filename: 'a\r\nBcc: d@evil.example.txt', content: Buffer.from('x'), contentType: 'text/plain' },
      ],
    });
    const head = raw.toString('latin1').split('\r\n\r\n')[0]!;
    expect(head).not.toMatch(/^(bcc|x-injected):/im);
    const parsed = await simpleParser(raw);
    expect(parsed.bcc).toBeUndefined();
    expect(parsed.headers.has('x-injected')).toBe(false);
  });

  it('writes 7-bit ASCII with CRLF line ends, lines of at most 78 characters except unbreakable words', () => {
    const { raw } = composeMessage(samples.everything!);
    expect(raw.every((byte) => byte < 0x80)).toBe(true);
    const text = raw.toString('latin1');
    expect(text.replace(/\r\n/g, '')).not.toMatch(/[\r\n]/);
    const long = text.split('\r\n').filter((line) => line.length > 78);
    expect(long).toEqual([expect.stringMatching(/^List-Unsubscribe: <https:/)]);
    // Bcc is in the envelope only.
    expect(text).not.toMatch(/hidden@example\.com|secret@example\.com|^bcc:/im);
  });

  it('keeps every header line within 998 characters, whatever the words (RFC 5322 §2.1.1; review, session 13)', async () => {
    const word = 'y'.repeat(3_000);
    const { raw } = composeMessage({
      from: `${'N'.repeat(1_200)} <sender@example.com>`,
      to: ['user@example.com'],
      subject: `Hi ${word}`,
      html: '<p>x</p>',
      text: 'x',
      headers: { 'X-Long': 'z'.repeat(998) },
    });
    const head = raw.toString('latin1').split('\r\n\r\n')[0]!;
    expect(Math.max(...head.split('\r\n').map((line) => line.length))).toBeLessThanOrEqual(998);
    const parsed = await simpleParser(raw);
    expect(parsed.subject).toBe(`Hi ${word}`);
    expect(decodeWords(String(parsed.headers.get('x-long')))).toBe('z'.repeat(998));
    expect(parsed.from?.value[0]).toMatchObject({ name: 'N'.repeat(1_200), address: 'sender@example.com' });
  });

  it('shows an ASCII subject that looks like an encoded word as written (nodemailer lets a client decode it)', async () => {
    const parsed = await simpleParser(
      composeMessage({
        from: '=?UTF-8?B?Zm9v?= <sender@example.com>',
        to: ['user@example.com'],
        subject: 'Literally =?UTF-8?B?Zm9v?= in the subject',
        html: '<p>x</p>',
        text: 'x',
      }).raw,
    );
    expect(parsed.subject).toBe('Literally =?UTF-8?B?Zm9v?= in the subject');
  });

  it('puts every recipient, Bcc included, in the envelope', () => {
    const { envelope } = composeMessage(samples.everything!);
    expect(envelope.from).toBe(samples.everything!.from);
    expect(envelope.to).toEqual([
      ...samples.everything!.to,
      ...samples.everything!.cc!,
      ...samples.everything!.bcc!,
    ]);
  });

  it('generates a Message-ID at the sender’s domain when none is given, and keeps a given one', () => {
    expect(composeMessage(samples.noText!).messageId).toMatch(/^<[0-9a-f-]{36}@example\.com>$/);
    expect(composeMessage({ ...samples.noText!, messageId: 'abc@x.test' }).messageId).toBe('<abc@x.test>');
  });

  it('keeps the same multipart structure as nodemailer (alternative inside mixed)', async () => {
    const text = composeMessage(samples.everything!).raw.toString('latin1');
    expect(text).toMatch(/^Content-Type: multipart\/mixed;/m);
    expect(text).toMatch(/^Content-Type: multipart\/alternative;/m);
    expect(text.indexOf('text/plain')).toBeLessThan(text.indexOf('text/html'));
    expect(composeMessage(samples.plain!).raw.toString('latin1')).not.toMatch(/multipart\/mixed/);
  });
});

describe('quotedPrintable', () => {
  it('round-trips through a decoder and keeps lines within 76 characters', async () => {
    const inputs = [
      'plain',
      '=x= ',
      'trailing\t\nspace \nend ',
      `${'é'.repeat(100)}\n${'a'.repeat(75)}=\n.dot`,
      Array.from({ length: 2000 }, (_, i) => String.fromCharCode(32 + (i % 300))).join(''),
    ];
    for (const input of inputs) {
      const encoded = quotedPrintable(input);
      for (const line of encoded.split('\r\n')) {
        expect(line.length).toBeLessThanOrEqual(76);
        expect(line).not.toMatch(/[ \t]$/);
        expect(line.startsWith('.')).toBe(false);
      }
      const decoded = Buffer.from(
        encoded
          .replace(/=\r\n/g, '')
          .replace(/=([0-9A-F]{2})/g, (_, hex: string) => String.fromCharCode(parseInt(hex, 16))),
        'latin1',
      ).toString('utf8');
      expect(decoded).toBe(input.replace(/\r\n?|\n/g, '\r\n'));
    }
  });
});
