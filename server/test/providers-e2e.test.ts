import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { createTestContext, type TestContext, waitFor } from './helpers/app.ts';
import { sessionHeaders, setupOwner, type TeamOwner } from './helpers/auth.ts';
import { buildApiKey, buildTemplate, send, simpleDesign } from './helpers/factories.ts';
import {
  FAKE_ADAPTER_TYPES,
  FAKE_CREDENTIALS,
  FAKE_ENDPOINT_VARIABLES,
  type FakeKind,
  type FakeProvider,
  type RecordedRequest,
  startFakeProvider,
} from './helpers/fake-providers.ts';

/**
 * The five hosted-API adapter types end to end (issue #10 "Done means"): POST /api/v1/send → queue
 * → worker → the provider's official SDK → a local fake of its API (PROVIDER_ENDPOINT_*). A provider
 * 500 is retried by the queue; a provider 4xx fails the email at once with the provider's message
 * in the log; POST /api/adapters/:id/test succeeds with good and fails with bad credentials.
 */

const KINDS: FakeKind[] = ['resend', 'sendgrid', 'mailgun', 'ses', 'postmark'];

/** Recipients and subject/HTML of a send as each API carries them. */
const RECEIVED: Record<FakeKind, (r: RecordedRequest) => { to: string[]; subject: string; html: string }> = {
  resend: (r) => ({ to: r.json.to, subject: r.json.subject, html: r.json.html }),
  sendgrid: (r) => ({
    to: r.json.personalizations[0].to.map((t: { email: string }) => t.email),
    subject: r.json.subject,
    html: r.json.content.find((c: { type: string }) => c.type === 'text/html').value,
  }),
  mailgun: (r) => ({
    to: r.form!.getAll('to') as string[],
    subject: String(r.form!.get('subject')),
    html: String(r.form!.get('html')),
  }),
  ses: (r) => {
    const mime = Buffer.from(r.json.Content.Raw.Data, 'base64').toString('utf8');
    return {
      to: r.json.Destination.ToAddresses,
      subject: /^Subject: (.*)$/m.exec(mime)?.[1] ?? '',
      html: mime.includes('Hello Ada') ? 'Hello Ada' : '',
    };
  },
  postmark: (r) => ({ to: r.json.To.split(', '), subject: r.json.Subject, html: r.json.HtmlBody }),
};

/** The auth header value each fake saw on a good request. */
const AUTH: Record<FakeKind, (r: RecordedRequest) => string | undefined> = {
  resend: (r) => r.headers.authorization,
  sendgrid: (r) => r.headers.authorization,
  mailgun: (r) => r.headers.authorization,
  ses: (r) => r.headers.authorization?.split('/')[0],
  postmark: (r) => r.headers['x-postmark-server-token'] as string,
};
const EXPECTED_AUTH: Record<FakeKind, string> = {
  resend: 'Bearer re_good_key',
  sendgrid: 'Bearer SG.good-key',
  mailgun: `Basic ${Buffer.from('api:key-good').toString('base64')}`,
  ses: 'AWS4-HMAC-SHA256 Credential=AKIAGOODKEY',
  postmark: 'good-server-token',
};

const BAD_CREDENTIALS: Record<FakeKind, object> = {
  resend: { apiKey: 're_wrong' },
  sendgrid: { apiKey: 'SG.wrong' },
  mailgun: { ...FAKE_CREDENTIALS.mailgun, apiKey: 'key-wrong' },
  ses: { ...FAKE_CREDENTIALS.ses, accessKeyId: 'AKIAWRONG' },
  postmark: { serverToken: 'wrong-token' },
};

describe('hosted-API providers end to end', () => {
  let ctx: TestContext;
  let owner: TeamOwner;
  let key: string;
  let templateId: string;
  const fakes = {} as Record<FakeKind, FakeProvider>;

  beforeAll(async () => {
    for (const kind of KINDS) fakes[kind] = await startFakeProvider(kind);
    ctx = await createTestContext('postgres', {
      SEND_RETRY_LIMIT: '2',
      SEND_RETRY_DELAY_SECONDS: '1',
      ...Object.fromEntries(KINDS.map((kind) => [FAKE_ENDPOINT_VARIABLES[kind], fakes[kind].url])),
    });
    await ctx.startWorkers();
  });

  afterAll(async () => {
    await ctx?.close();
    await Promise.all(Object.values(fakes).map((fake) => fake.close()));
  });

  const api = (method: 'GET' | 'POST' | 'PUT', url: string, payload?: object) =>
    ctx.app.inject({ method, url, headers: sessionHeaders(ctx.app, owner), ...(payload ? { payload } : {}) });

  const createAdapter = async (kind: FakeKind, config: object, isDefault: boolean) => {
    const response = await api('POST', '/api/adapters', {
      name: `${kind} ${isDefault ? 'good' : 'bad'}`,
      type: FAKE_ADAPTER_TYPES[kind],
      config,
      defaultFrom: 'Postwright Test <sender@postwright.test>',
      isDefault,
    });
    expect(response.statusCode, response.body).toBe(201);
    return response.json().data.id as string;
  };

  const settled = (id: string) =>
    waitFor(async () => {
      const log = (await api('GET', `/api/logs/${id}`)).json().data;
      return ['sent', 'failed'].includes(log.status) ? log : undefined;
    }, 30_000);

  const sendTo = async (to: string) => {
    const response = await send(ctx.app, key, { templateId, to, variables: { first_name: 'Ada' } });
    expect(response.statusCode, response.body).toBe(202);
    return response.json().data.id as string;
  };

  describe.each(KINDS)('%s', (kind) => {
    let goodId: string;
    let badId: string;

    // Every case gets a team of its own (CONVENTIONS.md): key, template, and the kind's adapters,
    // the good one its default. The app, database and fakes are the file's.
    beforeEach(async () => {
      owner = await setupOwner(ctx.app);
      key = (await buildApiKey(ctx.app, owner)).key;
      templateId = (
        await buildTemplate(ctx.app, owner, {
          name: 'Provider e2e',
          subject: 'Report for {{ first_name }}',
          designJson: simpleDesign('Hello {{ first_name }}'),
        })
      ).id;
      goodId = await createAdapter(kind, FAKE_CREDENTIALS[kind], true);
      badId = await createAdapter(kind, BAD_CREDENTIALS[kind], false);
    });

    it('the adapter test succeeds with good and fails with bad credentials', async () => {
      const good = await api('POST', `/api/adapters/${goodId}/test`);
      expect(good.statusCode, good.body).toBe(200);
      expect(good.json().data.success).toBe(true);
      const bad = await api('POST', `/api/adapters/${badId}/test`);
      expect(bad.statusCode, bad.body).toBe(200);
      expect(bad.json().data.success).toBe(false);
      expect(bad.json().data.message).toMatch(/invalid|Forbidden|revoked/);
    });

    it('delivers a send through the SDK to the API and records its message id', async () => {
      const before = fakes[kind].sends().length;
      const recipient = `${kind}-ok@example.test`;
      const log = await settled(await sendTo(recipient));
      expect(log.status, log.errorMessage).toBe('sent');
      const sends = fakes[kind].sends();
      expect(sends).toHaveLength(before + 1);
      const request = sends.at(-1)!;
      expect(AUTH[kind](request)).toBe(EXPECTED_AUTH[kind]);
      const received = RECEIVED[kind](request);
      expect(received.to).toEqual([recipient]);
      expect(received.subject).toBe('Report for Ada');
      expect(received.html).toContain('Hello Ada');
      expect(log.providerMessageId).toEqual(expect.any(String));
      expect(log.providerMessageId).not.toBe('');
    });

    it('retries a provider 500 and then sends', async () => {
      fakes[kind].failNextSends({ status: 500, message: 'Temporary failure at the provider' });
      const log = await settled(await sendTo(`${kind}-retry@example.test`));
      expect(log.status).toBe('sent');
      expect(log.attemptCount).toBe(2);
    });

    it("fails at once on a provider 4xx with the provider's message", async () => {
      const before = fakes[kind].sends().length;
      fakes[kind].failNextSends({ status: 400, message: `${kind}: the from address is not verified` });
      const log = await settled(await sendTo(`${kind}-rejected@example.test`));
      expect(log.status).toBe('failed');
      expect(log.attemptCount).toBe(1);
      expect(log.errorMessage).toBe(`${kind}: the from address is not verified`);
      expect(fakes[kind].sends()).toHaveLength(before + 1);
    });
  });
});
