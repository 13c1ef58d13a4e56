import { simpleParser } from 'mailparser';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { classifyHttpFailure, createHttpTransport } from '../src/providers/http-transport.ts';
import {
  type AdapterType,
  createProvider,
  type OutgoingEmail,
  ProviderError,
  parseProviderConfig,
} from '../src/providers/index.ts';
import { MAILGUN_REGION_BASE_URLS } from '../src/providers/mailgun.ts';
import {
  FAKE_ADAPTER_TYPES,
  FAKE_CREDENTIALS,
  FAKE_ENDPOINT_VARIABLES,
  type FakeKind,
  type FakeProvider,
  RESEND_RESTRICTED_KEY,
  type RecordedRequest,
  startFakeProvider,
} from './helpers/fake-providers.ts';
import { freePort } from './helpers/ports.ts';

/**
 * Each hosted-API provider sends through its official SDK to a local fake of its API (issue #10):
 * what the fake received is what the provider's documentation asks for; its errors are classified
 * by the one rule (429/5xx/network transient, other 4xx permanent) with the provider's message.
 */

const PDF = Buffer.from('%PDF-1.4 fake report bytes');

const email: OutgoingEmail = {
  from: '"Sender Name" <sender@example.test>',
  to: ['ada@example.test', 'bob@example.test'],
  cc: ['cc@example.test'],
  bcc: ['hidden@example.test'],
  replyTo: ['reply@example.test'],
  subject: 'Quarterly report',
  html: '<p>Hello <b>Ada</b></p>',
  text: 'Hello Ada',
  attachments: [{ filename: 'report.pdf', content: PDF, contentType: 'application/pdf' }],
  headers: { 'X-Postwright-Email-Id': 'eml_test1' },
  tags: { campaign: 'welcome' },
};

function providerAt(kind: FakeKind, url: string, credentials: object = FAKE_CREDENTIALS[kind]) {
  return createProvider(FAKE_ADAPTER_TYPES[kind] as AdapterType, credentials, {
    endpoints: { [FAKE_ENDPOINT_VARIABLES[kind]]: url },
  });
}

/** What each provider's API must have received for {@link email}, per its documentation. */
const EXPECTATIONS: Record<FakeKind, (request: RecordedRequest) => Promise<void> | void> = {
  resend(request) {
    expect(request.path).toBe('/emails');
    expect(request.headers.authorization).toBe('Bearer re_good_key');
    expect(request.json).toMatchObject({
      from: email.from,
      to: email.to,
      cc: email.cc,
      bcc: email.bcc,
      reply_to: email.replyTo,
      subject: email.subject,
      html: email.html,
      text: email.text,
      headers: { 'X-Postwright-Email-Id': 'eml_test1' },
      tags: [{ name: 'campaign', value: 'welcome' }],
      attachments: [
        { filename: 'report.pdf', content: PDF.toString('base64'), content_type: 'application/pdf' },
      ],
    });
  },
  sendgrid(request) {
    expect(request.path).toBe('/v3/mail/send');
    expect(request.headers.authorization).toBe('Bearer SG.good-key');
    expect(request.json.personalizations).toEqual([
      {
        to: [{ email: 'ada@example.test' }, { email: 'bob@example.test' }],
        cc: [{ email: 'cc@example.test' }],
        bcc: [{ email: 'hidden@example.test' }],
      },
    ]);
    expect(request.json).toMatchObject({
      from: { email: 'sender@example.test', name: 'Sender Name' },
      reply_to: { email: 'reply@example.test' },
      subject: email.subject,
      content: [
        { type: 'text/plain', value: email.text },
        { type: 'text/html', value: email.html },
      ],
      attachments: [
        {
          content: PDF.toString('base64'),
          filename: 'report.pdf',
          type: 'application/pdf',
          disposition: 'attachment',
        },
      ],
      headers: { 'X-Postwright-Email-Id': 'eml_test1' },
      custom_args: { campaign: 'welcome' },
    });
  },
  async mailgun(request) {
    expect(request.path).toBe('/v3/mg.example.test/messages');
    expect(request.headers.authorization).toBe(`Basic ${Buffer.from('api:key-good').toString('base64')}`);
    expect(request.headers['content-type']).toMatch(/^multipart\/form-data; boundary=/);
    const form = request.form!;
    expect(form.get('from')).toBe(email.from);
    expect(form.getAll('to')).toEqual(email.to);
    expect(form.getAll('cc')).toEqual(email.cc);
    expect(form.getAll('bcc')).toEqual(email.bcc);
    expect(form.get('subject')).toBe(email.subject);
    expect(form.get('html')).toBe(email.html);
    expect(form.get('text')).toBe(email.text);
    expect(form.get('h:Reply-To')).toBe('reply@example.test');
    expect(form.get('h:X-Postwright-Email-Id')).toBe('eml_test1');
    expect(form.get('v:campaign')).toBe('welcome');
    const attachment = form.get('attachment') as File;
    expect(attachment.name).toBe('report.pdf');
    expect(attachment.type).toBe('application/pdf');
    expect(Buffer.from(await attachment.arrayBuffer())).toEqual(PDF);
  },
  async ses(request) {
    expect(request.path).toBe('/v2/email/outbound-emails');
    expect(request.headers.authorization).toMatch(
      /^AWS4-HMAC-SHA256 Credential=AKIAGOODKEY\/\d{8}\/eu-west-1\/ses\/aws4_request, SignedHeaders=.+, Signature=[0-9a-f]{64}$/,
    );
    expect(request.json).toMatchObject({
      // The envelope takes bare addresses; the name is in the raw message's From header.
      FromEmailAddress: 'sender@example.test',
      Destination: { ToAddresses: email.to, CcAddresses: email.cc, BccAddresses: email.bcc },
      ReplyToAddresses: email.replyTo,
      EmailTags: [{ Name: 'campaign', Value: 'welcome' }],
    });
    const mime = await simpleParser(Buffer.from(request.json.Content.Raw.Data, 'base64'));
    expect(mime.from?.value).toEqual([{ address: 'sender@example.test', name: 'Sender Name' }]);
    expect(mime.subject).toBe(email.subject);
    expect(mime.html).toBe(email.html);
    expect(mime.text?.trim()).toBe(email.text);
    expect(mime.headers.get('x-postwright-email-id')).toBe('eml_test1');
    expect(mime.headers.has('bcc')).toBe(false);
    expect(mime.attachments.map((a) => [a.filename, a.contentType, a.content])).toEqual([
      ['report.pdf', 'application/pdf', PDF],
    ]);
  },
  postmark(request) {
    expect(request.path).toBe('/email');
    expect(request.headers['x-postmark-server-token']).toBe('good-server-token');
    expect(request.json).toMatchObject({
      From: email.from,
      To: 'ada@example.test, bob@example.test',
      Cc: 'cc@example.test',
      Bcc: 'hidden@example.test',
      ReplyTo: 'reply@example.test',
      Subject: email.subject,
      HtmlBody: email.html,
      TextBody: email.text,
      Headers: [{ Name: 'X-Postwright-Email-Id', Value: 'eml_test1' }],
      Metadata: { campaign: 'welcome' },
      Attachments: [{ Name: 'report.pdf', Content: PDF.toString('base64'), ContentType: 'application/pdf' }],
    });
  },
};

/** The message id each fake hands out for its first send. */
const FIRST_IDS: Record<FakeKind, string> = {
  resend: '49a3999c-0ce1-4ea6-ab68-afcd6dc2e791',
  sendgrid: 'sg-message-1',
  mailgun: '<20261123.1@mg.example.test>',
  ses: '0102018f-ses-message-1',
  postmark: 'b7bc2f4a-e38e-4336-af7d-e6c392314001',
};

/** A 4xx each API answers a bad request with (Postmark and Resend use 422). */
const CLIENT_ERROR: Record<FakeKind, number> = {
  resend: 422,
  sendgrid: 400,
  mailgun: 400,
  ses: 400,
  postmark: 422,
};

/** Credentials of the right shape that the fake refuses. */
const BAD_CREDENTIALS: Record<FakeKind, object> = {
  resend: { apiKey: 're_wrong' },
  sendgrid: { apiKey: 'SG.wrong' },
  mailgun: { ...FAKE_CREDENTIALS.mailgun, apiKey: 'key-wrong' },
  ses: { ...FAKE_CREDENTIALS.ses, accessKeyId: 'AKIAWRONG' },
  postmark: { serverToken: 'wrong-token' },
};

const KINDS: FakeKind[] = ['resend', 'sendgrid', 'mailgun', 'ses', 'postmark'];

describe.each(KINDS)('%s provider against a fake of its API', (kind) => {
  let fake: FakeProvider;

  // Every case gets a fake API of its own (its sends, its message-id counter, its queued failures),
  // as every test gets its own team (CONVENTIONS.md): the first send of each case is the fake's first.
  beforeEach(async () => {
    fake = await startFakeProvider(kind);
  });
  afterEach(() => fake?.close());

  it('sends every field the way the API expects and returns its message id', async () => {
    const provider = providerAt(kind, fake.url);
    try {
      const result = await provider.send(email);
      expect(result.providerMessageId).toBe(FIRST_IDS[kind]);
      const [request] = fake.sends().slice(-1);
      await EXPECTATIONS[kind](request!);
    } finally {
      await provider.close();
    }
  });

  it('forwards each mailbox as the one address validation read, never a string the API could read as two', async () => {
    // Review finding, session 14: validation (nodemailer's addressparser) reads each of these as
    // ONE mailbox (the address in brackets or first, the rest a name or a comment); forwarded as
    // typed, an API's own parser could take evil.test's address too, past the recipient limit and
    // the suppression check.
    const provider = providerAt(kind, fake.url);
    try {
      await provider.send({
        ...email,
        from: 'Sender (x, bcc@evil.test) <sender@example.test>',
        to: ['ada@example.test bob@evil.test', 'Ann (c, carl@evil.test) <ann@example.test>'],
        cc: ['<cc@example.test> dan@evil.test'],
        bcc: [],
        replyTo: ['"Re \\"ply\\"" <reply@example.test>'],
      });
      const [request] = fake.sends().slice(-1);
      const named = ['"bob@evil.test" <ada@example.test>', '"Ann" <ann@example.test>'];
      if (kind === 'resend') {
        expect(request!.json).toMatchObject({
          from: '"Sender" <sender@example.test>',
          to: named,
          cc: ['"dan@evil.test" <cc@example.test>'],
          reply_to: ['"Re \\"ply\\"" <reply@example.test>'],
        });
      } else if (kind === 'mailgun') {
        expect(request!.form!.get('from')).toBe('"Sender" <sender@example.test>');
        expect(request!.form!.getAll('to')).toEqual(named);
        expect(request!.form!.getAll('cc')).toEqual(['"dan@evil.test" <cc@example.test>']);
        expect(request!.form!.get('h:Reply-To')).toBe('"Re \\"ply\\"" <reply@example.test>');
      } else if (kind === 'postmark') {
        expect(request!.json).toMatchObject({
          From: '"Sender" <sender@example.test>',
          To: named.join(', '),
          Cc: '"dan@evil.test" <cc@example.test>',
          ReplyTo: '"Re \\"ply\\"" <reply@example.test>',
        });
      } else if (kind === 'ses') {
        expect(request!.json).toMatchObject({
          FromEmailAddress: 'sender@example.test',
          Destination: {
            ToAddresses: ['ada@example.test', 'ann@example.test'],
            CcAddresses: ['cc@example.test'],
          },
          ReplyToAddresses: ['reply@example.test'],
        });
      } else {
        expect(request!.json.personalizations[0]).toMatchObject({
          to: [
            { email: 'ada@example.test', name: 'bob@evil.test' },
            { email: 'ann@example.test', name: 'Ann' },
          ],
          cc: [{ email: 'cc@example.test', name: 'dan@evil.test' }],
        });
      }
      const sent =
        request!.json ?? ['from', 'to', 'cc', 'h:Reply-To'].flatMap((field) => request!.form!.getAll(field));
      expect(JSON.stringify(sent)).not.toMatch(/(?<!")(bob|carl|dan|bcc)@evil\.test(?!")/);
    } finally {
      await provider.close();
    }
  });

  it("a 500 is transient, a 4xx permanent, each with the provider's own message", async () => {
    const provider = providerAt(kind, fake.url);
    try {
      fake.failNextSends(
        { status: 500, message: 'Internal failure at the provider' },
        { status: CLIENT_ERROR[kind], message: 'The from address is not a verified sender' },
        { status: 429, message: 'Too many requests, slow down' },
      );
      const serverError = await provider.send(email).catch((e: unknown) => e);
      expect(serverError).toBeInstanceOf(ProviderError);
      expect(serverError).toMatchObject({ permanent: false, message: 'Internal failure at the provider' });
      const clientError = await provider.send(email).catch((e: unknown) => e);
      expect(clientError).toMatchObject({
        permanent: true,
        message: 'The from address is not a verified sender',
      });
      const tooMany = await provider.send(email).catch((e: unknown) => e);
      expect(tooMany).toMatchObject({ permanent: false, message: 'Too many requests, slow down' });
    } finally {
      await provider.close();
    }
  });

  it('verify succeeds with good credentials and reports the refusal of bad ones', async () => {
    const good = providerAt(kind, fake.url);
    const bad = providerAt(kind, fake.url, BAD_CREDENTIALS[kind]);
    try {
      expect(await good.verify()).toMatchObject({ success: true });
      const refused = await bad.verify();
      expect(refused.success).toBe(false);
      expect(refused.message).toMatch(/invalid|Forbidden|revoked/);
    } finally {
      await Promise.all([good.close(), bad.close()]);
    }
  });

  it('reuses kept-alive connections for consecutive sends (one SDK client per adapter version)', async () => {
    const provider = providerAt(kind, fake.url);
    try {
      const before = fake.sends().length;
      for (let i = 0; i < 4; i += 1) await provider.send(email);
      const ports = fake
        .sends()
        .slice(before)
        .map((r) => r.remotePort);
      expect(ports).toHaveLength(4);
      // Without keep-alive every request opens a new connection (a new client port); undici's pool
      // may alternate between two kept-alive connections.
      expect(new Set(ports).size).toBeLessThanOrEqual(2);
    } finally {
      await provider.close();
    }
  });

  it('ends a request the API never answers at the request timeout, so no connection is held for good', async () => {
    // Session 16: mailgun.js and @sendgrid/client set no timeout (a request given up at the send
    // deadline held its connection and send slot until the API answered), and Postmark's own 60 s
    // ended requests before a longer SEND_TIMEOUT_SECONDS. Every SDK now ends a request at
    // requestTimeoutMs, after the worker's deadline.
    fake.delayNextSends(20_000);
    const provider = createProvider(FAKE_ADAPTER_TYPES[kind] as AdapterType, FAKE_CREDENTIALS[kind], {
      endpoints: { [FAKE_ENDPOINT_VARIABLES[kind]]: fake.url },
      requestTimeoutMs: 500,
    });
    try {
      const started = performance.now();
      const error = await provider.send(email).catch((e: unknown) => e);
      expect(error, String(error)).toBeInstanceOf(ProviderError);
      expect((error as ProviderError).permanent).toBe(false);
      expect(performance.now() - started).toBeLessThan(10_000);
    } finally {
      await provider.close();
    }
  }, 30_000);

  it("sends tags given as a list of labels to the provider's own tag field", async () => {
    // Issue #10 calls tags a string list (review finding, session 16): labels go where each
    // provider files its tags, not into its metadata.
    const provider = providerAt(kind, fake.url);
    try {
      await provider.send({ ...email, tags: ['welcome', 'onboarding'] });
      const [request] = fake.sends().slice(-1);
      if (kind === 'resend') {
        expect(request!.json.tags).toEqual([
          { name: 'welcome', value: 'true' },
          { name: 'onboarding', value: 'true' },
        ]);
      } else if (kind === 'ses') {
        expect(request!.json.EmailTags).toEqual([
          { Name: 'welcome', Value: 'true' },
          { Name: 'onboarding', Value: 'true' },
        ]);
      } else if (kind === 'sendgrid') {
        expect(request!.json.categories).toEqual(['welcome', 'onboarding']);
        expect(request!.json.custom_args).toBeUndefined();
      } else if (kind === 'mailgun') {
        expect(request!.form!.getAll('o:tag')).toEqual(['welcome', 'onboarding']);
        expect(request!.form!.get('v:welcome')).toBeNull();
        expect(request!.form!.get('v:0')).toBeNull();
      } else {
        expect(request!.json.Tag).toBe('welcome');
        expect(request!.json.Metadata).toBeUndefined();
      }
    } finally {
      await provider.close();
    }
  });

  it("records a proxy's HTML error page as its status, never the page itself", async () => {
    // Review finding, session 16: Mailgun stored the whole page, SES an SDK deserialization error,
    // Resend "try again later" for a permanent 413.
    const page = `<html><head><title>413</title></head><body>${'x'.repeat(5000)}</body></html>`;
    fake.failNextSends({ status: 413, message: '', html: page }, { status: 502, message: '', html: page });
    const provider = providerAt(kind, fake.url);
    try {
      const tooLarge = (await provider.send(email).catch((e: unknown) => e)) as ProviderError;
      const badGateway = (await provider.send(email).catch((e: unknown) => e)) as ProviderError;
      expect(tooLarge).toBeInstanceOf(ProviderError);
      expect(tooLarge.permanent).toBe(true);
      expect(badGateway.permanent).toBe(false);
      if (kind === 'postmark') {
        // The Postmark SDK says so itself.
        expect(tooLarge.message).toBe('Request returned status code 413');
      } else {
        expect(tooLarge.message).toBe('HTTP 413 Payload Too Large');
        expect(badGateway.message).toBe('HTTP 502 Bad Gateway');
      }
    } finally {
      await provider.close();
    }
  });

  it('a connection refused is transient', async () => {
    const provider = providerAt(kind, `http://127.0.0.1:${await freePort()}`);
    try {
      const error = await provider.send(email).catch((e: unknown) => e);
      expect(error).toBeInstanceOf(ProviderError);
      expect((error as ProviderError).permanent).toBe(false);
    } finally {
      await provider.close();
    }
  });
});

describe('resend provider: restricted keys', () => {
  it('verify accepts a sending-only key, whose domain list is refused as restricted_api_key', async () => {
    const fake = await startFakeProvider('resend');
    const provider = providerAt('resend', fake.url, { apiKey: RESEND_RESTRICTED_KEY });
    try {
      expect(await provider.verify()).toEqual({
        success: true,
        message: 'Authenticated with Resend (the key may only send emails)',
      });
      expect((await provider.send(email)).providerMessageId).toEqual(expect.any(String));
    } finally {
      await provider.close();
      await fake.close();
    }
  });
});

describe('hosted-API transport: outbound policy', () => {
  it('refuses a private address unless the base URL is the operator override', async () => {
    const fake = await startFakeProvider('postmark');
    const localhost = fake.url.replace('127.0.0.1', 'localhost');
    const policed = createHttpTransport({ defaultBaseUrl: localhost });
    const trusted = createHttpTransport({
      defaultBaseUrl: 'https://api.postmarkapp.com',
      endpoint: localhost,
    });
    try {
      const refused = await policed.fetch(`${localhost}/server`).catch((e: unknown) => e);
      expect((refused as { code?: string }).code).toBe('EOUTBOUND');
      expect(classifyHttpFailure({ message: 'x', cause: refused }).permanent).toBe(true);
      await expect(policed.checkHost()).rejects.toMatchObject({ permanent: true, providerCode: 'EOUTBOUND' });
      expect(trusted.baseUrl).toBe(localhost);
      expect((await trusted.fetch(`${trusted.baseUrl}/server`)).status).toBe(401);
      expect(fake.requests).toHaveLength(1);
    } finally {
      await Promise.all([policed.close(), trusted.close(), fake.close()]);
    }
  });
});

describe('mailgun regions', () => {
  it('us (the default) uses api.mailgun.net and eu api.eu.mailgun.net (spec, "Adapter")', () => {
    expect(MAILGUN_REGION_BASE_URLS).toEqual({
      us: 'https://api.mailgun.net',
      eu: 'https://api.eu.mailgun.net',
    });
    expect(parseProviderConfig('mailapi_domain', { apiKey: 'k', domain: 'mg.example.com' }).region).toBe(
      'us',
    );
  });
});

describe('what SendGrid and Postmark refuse in a payload (review findings, session 16)', () => {
  it('SendGrid: names with , or ; go as encoded words, and each address once across to, cc, bcc and reply-to', async () => {
    const fake = await startFakeProvider('sendgrid');
    const provider = providerAt('sendgrid', fake.url);
    try {
      await provider.send({
        ...email,
        from: '"Acme; Billing" <billing@example.test>',
        to: ['"Doe, John" <john@example.test>', 'ada@example.test'],
        cc: ['ADA@example.test', 'cc@example.test'],
        bcc: ['john@EXAMPLE.test', 'hidden@example.test'],
        replyTo: ['r@example.test', 'R@example.test'],
      });
      const [request] = fake.sends();
      expect(request!.json.from).toEqual({
        email: 'billing@example.test',
        name: '=?UTF-8?Q?Acme=3B_Billing?=',
      });
      expect(request!.json.personalizations).toEqual([
        {
          to: [
            { email: 'john@example.test', name: '=?UTF-8?Q?Doe=2C_John?=' },
            { email: 'ada@example.test' },
          ],
          cc: [{ email: 'cc@example.test' }],
          bcc: [{ email: 'hidden@example.test' }],
        },
      ]);
      expect(request!.json.reply_to).toEqual({ email: 'r@example.test' });
      expect(request!.json.reply_to_list).toBeUndefined();
    } finally {
      await provider.close();
      await fake.close();
    }
  });

  it('an email that reaches them anyway (a fallback) gets tags cut to their limits', async () => {
    const tags = Object.fromEntries(
      Array.from({ length: 40 }, (_, i) => [`tag_${i}_${'n'.repeat(40)}`, 'é'.repeat(256)]),
    );
    const sendgrid = await startFakeProvider('sendgrid');
    const postmark = await startFakeProvider('postmark');
    const providers = [providerAt('sendgrid', sendgrid.url), providerAt('postmark', postmark.url)];
    try {
      await providers[0]!.send({ ...email, tags });
      await providers[1]!.send({ ...email, tags: { ...tags, A_Key: '1', a_key: '2' } });
      const customArgs = sendgrid.sends()[0]!.json.custom_args;
      expect(Buffer.byteLength(JSON.stringify(customArgs))).toBeLessThanOrEqual(10_000);
      expect(Object.keys(customArgs).length).toBeGreaterThan(0);
      const metadata = postmark.sends()[0]!.json.Metadata as Record<string, string>;
      expect(Object.keys(metadata)).toHaveLength(10);
      for (const [name, value] of Object.entries(metadata)) {
        expect(name.length).toBeLessThanOrEqual(20);
        expect(value.length).toBeLessThanOrEqual(80);
      }
    } finally {
      for (const provider of providers) await provider.close();
      await sendgrid.close();
      await postmark.close();
    }
  });
});
