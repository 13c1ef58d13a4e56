import { sql } from 'drizzle-orm';
import { Parser } from 'htmlparser2';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { transitionMany } from '../src/modules/emails/index.ts';
import { RECORD_WAIT_MS } from '../src/modules/tracking/index.ts';
import { signTrackingToken, trackingKey } from '../src/tracking/tokens.ts';
import { createTestContext, TEST_BASE_URL, type TestContext, waitFor } from './helpers/app.ts';
import { dashboardCall, dataOf, emailStatus, expectError, send } from './helpers/factories.ts';
import { createTeamWithKey, type SendingTeam } from './helpers/sending-team.ts';
import { startTestSmtpServer, type TestSmtpServer } from './helpers/smtp-server.ts';

/** The links of the design below, as the email carries them. */
const LINKS = `<p>Hi {{ first_name }}</p>
<a href="https://example.com/welcome?a=1&amp;b=2">Welcome</a>
<a href="mailto:help@example.com">Mail</a>
<a href="tel:+15551234">Call</a>
<a href="#top">Top</a>
<a href="https://example.com/private" data-pw-notrack>Private</a>
<a href="http://example.org/docs">Docs</a>`;

/** Tracked link targets (WHATWG-normalised, entities decoded). */
const WELCOME = 'https://example.com/welcome?a=1&b=2';
const DOCS = 'http://example.org/docs';

function linkDesign() {
  return {
    root: {
      type: 'EmailLayout',
      data: { backdropColor: '#F5F5F5', canvasColor: '#FFFFFF', textColor: '#262626', childrenIds: ['h'] },
    },
    h: { type: 'Html', data: { props: { contents: LINKS } } },
  };
}

/** Every `<a href>` and `<img src>` of `html`, parsed with htmlparser2. */
function linksOf(html: string): { hrefs: string[]; imgs: string[] } {
  const hrefs: string[] = [];
  const imgs: string[] = [];
  const parser = new Parser({
    onopentag(name, attribs) {
      if (name === 'a' && attribs.href !== undefined) hrefs.push(attribs.href);
      if (name === 'img' && attribs.src !== undefined) imgs.push(attribs.src);
    },
  });
  parser.end(html);
  return { hrefs, imgs };
}

/** `url` without the test BASE_URL (what app.inject takes). */
function pathOf(url: string): string {
  expect(url.startsWith(TEST_BASE_URL)).toBe(true);
  return url.slice(TEST_BASE_URL.length);
}

describe('built-in open and click tracking (issue #11)', () => {
  let ctx: TestContext;
  let smtp: TestSmtpServer;
  let counter = 0;

  beforeAll(async () => {
    ctx = await createTestContext('postgres');
    // An address starting with "refuse-once-" is refused (550) the first time only: a failed email to resend.
    const refused = new Set<string>();
    smtp = await startTestSmtpServer({
      onRcptTo(address, _session, callback) {
        if (!address.address.startsWith('refuse-once-') || refused.has(address.address)) return callback();
        refused.add(address.address);
        callback(Object.assign(new Error('mailbox unavailable'), { responseCode: 550 }));
      },
    });
    await ctx.startWorkers();
  });

  afterAll(async () => {
    await ctx?.close();
    await smtp?.close();
  });

  async function team(template: Record<string, unknown> = {}): Promise<SendingTeam> {
    return createTeamWithKey(ctx.app, {
      smtpPort: smtp.port,
      template: { name: 'Links', designJson: linkDesign(), ...template },
    });
  }

  /** Sends the team's template and returns the email id and the HTML the SMTP server received. */
  async function sendAndReceive(t: SendingTeam, extra: Record<string, unknown> = {}) {
    const to = `tracking-${++counter}-${Date.now()}@example.test`;
    const response = await send(ctx.app, t.key, {
      templateId: t.templateId,
      to,
      variables: { first_name: 'Ada' },
      ...extra,
    });
    expect(response.statusCode, response.body).toBe(202);
    const id = response.json().data.id as string;
    const message = await waitFor(
      async () => smtp.messages.find((m) => m.envelopeTo.includes(to)),
      30_000,
      'the message',
    );
    await waitFor(async () => ((await emailStatus(ctx.app, t.key, id)).status === 'sent' ? true : undefined));
    return { id, html: String(message.parsed.html), text: String(message.parsed.text) };
  }

  async function logOf(t: SendingTeam, id: string) {
    return dataOf(await dashboardCall(ctx.app, t.owner, 'GET', `/api/logs/${id}`));
  }

  function trackedEvents(log: { events: { status: string; detail: Record<string, unknown> }[] }) {
    return log.events
      .filter((e) => e.detail.source === 'tracking')
      .map((e) => (e.detail.url ? `${e.status} ${e.detail.url}` : e.status));
  }

  function hit(url: string, headers: Record<string, string> = {}, method: 'GET' | 'HEAD' = 'GET') {
    return ctx.app.inject({ method, url: pathOf(url), headers: { 'user-agent': 'Mozilla/5.0', ...headers } });
  }

  /** The pixel and the tracked links of a tracked email's HTML. */
  function trackingUrls(html: string) {
    const { hrefs, imgs } = linksOf(html);
    const pixel = imgs.find((src) => src.startsWith(`${TEST_BASE_URL}/t/o/`));
    const clicks = hrefs.filter((href) => href.startsWith(`${TEST_BASE_URL}/t/c/`));
    return { pixel, clicks, hrefs };
  }

  it('a template with trackOpens and trackClicks sends a pixel and rewritten http(s) links only', async () => {
    const t = await team({ trackOpens: true, trackClicks: true });
    const template = await dataOf(
      await dashboardCall(ctx.app, t.owner, 'GET', `/api/templates/${t.templateId}`),
    );
    expect(template).toMatchObject({ trackOpens: true, trackClicks: true });
    const { html, text } = await sendAndReceive(t);
    const { pixel, clicks, hrefs } = trackingUrls(html);
    expect(pixel).toBeDefined();
    expect(clicks).toHaveLength(2);
    // mailto:, tel:, #anchors and data-pw-notrack links are left as they were.
    expect(hrefs.filter((href) => !href.startsWith(`${TEST_BASE_URL}/t/c/`))).toEqual([
      'mailto:help@example.com',
      'tel:+15551234',
      '#top',
      'https://example.com/private',
    ]);
    expect(html).not.toContain('https://example.com/welcome');
    expect(html).not.toContain('http://example.org/docs');
    // The text part is not rewritten.
    expect(text).toContain('Hi Ada');
    expect(text).not.toContain('/t/c/');
  });

  it('the pixel answers 200 image/gif and moves the email to opened once, HEAD and pre-fetchers not counted', async () => {
    const t = await team({ trackOpens: true });
    const { id, html } = await sendAndReceive(t);
    const { pixel, clicks } = trackingUrls(html);
    expect(clicks).toEqual([]);

    // Machine hits get the pixel but do not count.
    for (const response of [
      await hit(pixel!, {}, 'HEAD'),
      await hit(pixel!, { 'user-agent': 'Mozilla/5.0 (compatible; Barracuda Sentinel)' }),
      await hit(pixel!, { 'sec-purpose': 'prefetch' }),
    ]) {
      expect(response.statusCode).toBe(200);
      expect(response.headers['content-type']).toBe('image/gif');
    }
    expect((await logOf(t, id)).status).toBe('sent');

    const response = await hit(pixel!);
    expect(response.statusCode).toBe(200);
    expect(response.headers['content-type']).toBe('image/gif');
    expect(response.headers['cache-control']).toContain('no-store');
    expect(response.rawPayload.subarray(0, 6).toString()).toBe('GIF89a');
    const log = await logOf(t, id);
    expect(log.status).toBe('opened');
    expect(log.openedAt).toEqual(expect.any(String));

    // Repeated hits (a client re-rendering the mail) append nothing and keep openedAt.
    await hit(pixel!);
    await hit(pixel!);
    const again = await logOf(t, id);
    expect(trackedEvents(again)).toEqual(['opened']);
    expect(again.openedAt).toBe(log.openedAt);
  });

  it('a flood of one pixel and link queues no transaction per hit on the pool (review finding, session 14)', async () => {
    // Every hit of a valid token ran a transaction locking its email's row, repeats too: 3,000
    // concurrent hits of one pixel queued 2,995 of them on the pool, and every other request of
    // the process (another team's send took 7 s) waited behind them.
    const t = await team({ trackOpens: true, trackClicks: true });
    const { id, html } = await sendAndReceive(t);
    const { pixel, clicks } = trackingUrls(html);
    const pool = ctx.app.ctx.database.pool;
    let mostWaiting = 0;
    const sampler = setInterval(() => {
      mostWaiting = Math.max(mostWaiting, pool.waitingCount);
    }, 1);
    try {
      const answers = await Promise.all(
        Array.from({ length: 400 }, (_, i) => hit(i % 2 === 0 ? pixel! : clicks[0]!)),
      );
      expect(answers.map((a) => a.statusCode).sort()).toEqual([
        ...Array<number>(200).fill(200),
        ...Array<number>(200).fill(302),
      ]);
      await waitFor(async () => (trackedEvents(await logOf(t, id)).length === 2 ? true : undefined));
    } finally {
      clearInterval(sampler);
    }
    expect(trackedEvents(await logOf(t, id))).toEqual(['opened', `clicked ${WELCOME}`]);
    expect(mostWaiting).toBeLessThan(10);
  });

  it('a click link 302s to the original URL and moves the email to clicked (with the open it implies)', async () => {
    const t = await team({ trackClicks: true });
    const { id, html } = await sendAndReceive(t);
    const { pixel, clicks } = trackingUrls(html);
    expect(pixel).toBeUndefined();

    const response = await hit(clicks[0]!);
    expect(response.statusCode).toBe(302);
    expect(response.headers.location).toBe(WELCOME);
    const log = await logOf(t, id);
    expect(log.status).toBe('clicked');
    expect(log.clickedAt).toEqual(expect.any(String));
    expect(log.openedAt).toEqual(expect.any(String));

    // The same link again is not recorded twice; another link is one more click.
    await hit(clicks[0]!);
    const second = await hit(clicks[1]!);
    expect(second.statusCode).toBe(302);
    expect(second.headers.location).toBe(DOCS);
    await hit(clicks[1]!);
    const after = await logOf(t, id);
    expect(trackedEvents(after)).toEqual(['opened', `clicked ${WELCOME}`, `clicked ${DOCS}`]);
    expect(after.clickedAt).toBe(log.clickedAt);

    // A scanner following the link is redirected but not recorded.
    const scanned = await hit(clicks[0]!, { 'user-agent': 'Mozilla/5.0 Proofpoint URL Defense' });
    expect(scanned.statusCode).toBe(302);
    expect(trackedEvents(await logOf(t, id))).toHaveLength(3);
  });

  it('a tampered token is 404 (never a redirect) and changes nothing; a link not in the email cannot be made', async () => {
    const t = await team({ trackOpens: true, trackClicks: true });
    const { id, html } = await sendAndReceive(t);
    const { pixel, clicks } = trackingUrls(html);
    const token = pathOf(clicks[0]!).slice('/t/c/'.length);
    const [payload, signature] = token.split('.') as [string, string];

    // Another URL in the payload, the email's signature kept.
    const [, emailId, teamId] = JSON.parse(Buffer.from(payload, 'base64url').toString());
    const evil = Buffer.from(JSON.stringify(['c', emailId, teamId, 'https://evil.test/'])).toString(
      'base64url',
    );
    // A token signed with another key (what an attacker without ENCRYPTION_KEY could make).
    const forged = signTrackingToken(trackingKey(Buffer.alloc(32, 9)), {
      kind: 'click',
      emailId,
      teamId,
      url: 'https://evil.test/',
    });
    const flipped = signature.startsWith('A') ? `B${signature.slice(1)}` : `A${signature.slice(1)}`;
    const bad = [
      `/t/c/${evil}.${signature}`,
      `/t/c/${forged}`,
      `/t/c/${payload}.${flipped}`,
      `/t/c/${payload}`,
      `/t/c/${token.slice(0, -2)}`,
      `/t/c/not-a-token`,
      // An open token is not a click token, nor the reverse.
      `/t/c/${pathOf(pixel!).slice('/t/o/'.length)}`,
      `/t/o/${token}`,
      `/t/o/${pathOf(pixel!).slice('/t/o/'.length)}x`,
    ];
    for (const url of bad) {
      const response = await ctx.app.inject({ method: 'GET', url });
      expectError(response, 404, 'NOT_FOUND');
      expect(response.headers.location, url).toBeUndefined();
    }
    const log = await logOf(t, id);
    expect(log.status).toBe('sent');
    expect(log.openedAt).toBeNull();
    expect(trackedEvents(log)).toEqual([]);
  });

  it('an open before the email is recorded sent is history only, and the next open after it counts', async () => {
    const t = await team({ trackOpens: true });
    // Scheduled: the email stays queued, as it is between the hand-off and the recording of `sent`.
    const response = await send(ctx.app, t.key, {
      templateId: t.templateId,
      to: `early-${Date.now()}@example.test`,
      variables: { first_name: 'Ada' },
      scheduledAt: new Date(Date.now() + 3_600_000).toISOString(),
    });
    const { id } = await dataOf(response, 202);
    const pixel = `/t/o/${signTrackingToken(trackingKey(Buffer.alloc(32, 7)), { kind: 'open', emailId: id, teamId: t.owner.teamId })}`;
    const hitPixel = () =>
      ctx.app.inject({ method: 'GET', url: pixel, headers: { 'user-agent': 'Mozilla/5.0' } });
    expect((await hitPixel()).statusCode).toBe(200);
    await waitFor(async () => (trackedEvents(await logOf(t, id)).length === 1 ? true : undefined));
    expect((await logOf(t, id)).status).toBe('queued');
    await ctx.context.db.transaction((tx) =>
      transitionMany(tx, [
        {
          email: { id, teamId: t.owner.teamId },
          event: { status: 'sent', set: { providerMessageId: 'early-1' } },
        },
      ]),
    );
    // Before: the early open counted as seen, and the email stayed `sent` without `openedAt`.
    expect((await hitPixel()).statusCode).toBe(200);
    const log = await waitFor(async () => {
      const current = await logOf(t, id);
      return current.status === 'opened' ? current : undefined;
    });
    expect(log.openedAt).not.toBeNull();
    expect(trackedEvents(log)).toEqual(['opened', 'opened']);
    // Repeats after it change nothing.
    await hitPixel();
    expect(trackedEvents(await logOf(t, id))).toEqual(['opened', 'opened']);
  });

  it('tracking is off by default: the HTML is sent unchanged; turning it on is copied to the next version', async () => {
    const t = await team();
    const template = await dataOf(
      await dashboardCall(ctx.app, t.owner, 'GET', `/api/templates/${t.templateId}`),
    );
    expect(template).toMatchObject({ trackOpens: false, trackClicks: false });
    const plain = await sendAndReceive(t);
    expect(plain.html).not.toContain('/t/o/');
    expect(plain.html).not.toContain('/t/c/');
    expect(linksOf(plain.html).hrefs).toEqual([
      WELCOME,
      'mailto:help@example.com',
      'tel:+15551234',
      '#top',
      'https://example.com/private',
      DOCS,
    ]);

    const updated = await dashboardCall(ctx.app, t.owner, 'PUT', `/api/templates/${t.templateId}`, {
      trackOpens: true,
    });
    expect(updated.statusCode, updated.body).toBe(200);
    const tracked = await sendAndReceive(t);
    expect(trackingUrls(tracked.html).pixel).toBeDefined();
    expect(trackingUrls(tracked.html).clicks).toEqual([]);
    const versions = await dataOf(
      await dashboardCall(ctx.app, t.owner, 'GET', `/api/templates/${t.templateId}/versions`),
    );
    expect(versions).toHaveLength(2);
  });

  it('a restored version and a duplicate keep the tracking settings', async () => {
    const t = await team({ trackOpens: true, trackClicks: true });
    const get = async (ref: string) =>
      dataOf(await dashboardCall(ctx.app, t.owner, 'GET', `/api/templates/${ref}`));
    const [first] = await dataOf(
      await dashboardCall(ctx.app, t.owner, 'GET', `/api/templates/${t.templateId}/versions`),
    );
    await dataOf(
      await dashboardCall(ctx.app, t.owner, 'PUT', `/api/templates/${t.templateId}`, {
        trackOpens: false,
        trackClicks: false,
      }),
    );
    expect(await get(t.templateId)).toMatchObject({ trackOpens: false, trackClicks: false });
    await dataOf(
      await dashboardCall(
        ctx.app,
        t.owner,
        'PUT',
        `/api/templates/${t.templateId}/versions/${first.id}/restore`,
      ),
    );
    expect(await get(t.templateId)).toMatchObject({ trackOpens: true, trackClicks: true });
    const copy = await dataOf(
      await dashboardCall(ctx.app, t.owner, 'POST', `/api/templates/${t.templateId}/duplicate`),
      201,
    );
    expect(await get(copy.id)).toMatchObject({ trackOpens: true, trackClicks: true });
  });

  it('the per-send trackOpens/trackClicks override the template both ways', async () => {
    const off = await team();
    const on = await sendAndReceive(off, { trackOpens: true, trackClicks: true });
    expect(trackingUrls(on.html).pixel).toBeDefined();
    expect(trackingUrls(on.html).clicks).toHaveLength(2);

    const tracked = await team({ trackOpens: true, trackClicks: true });
    const none = await sendAndReceive(tracked, { trackOpens: false, trackClicks: false });
    expect(none.html).not.toContain('/t/o/');
    expect(none.html).not.toContain('/t/c/');
    const onlyClicks = await sendAndReceive(tracked, { trackOpens: false });
    expect(trackingUrls(onlyClicks.html).pixel).toBeUndefined();
    expect(trackingUrls(onlyClicks.html).clicks).toHaveLength(2);

    // The batch endpoint takes the same fields, per email.
    const batchTo = [`batch-on-${Date.now()}@example.test`, `batch-off-${Date.now()}@example.test`];
    const batch = await ctx.app.inject({
      method: 'POST',
      url: '/api/v1/send/batch',
      headers: { 'x-api-key': off.key },
      payload: {
        emails: [
          { templateId: off.templateId, to: batchTo[0], trackClicks: true },
          { templateId: off.templateId, to: batchTo[1] },
        ],
      },
    });
    expect(batch.statusCode, batch.body).toBe(202);
    const [batchOn, batchOff] = await Promise.all(
      batchTo.map((to) =>
        waitFor(async () => smtp.messages.find((m) => m.envelopeTo.includes(to)), 30_000, to),
      ),
    );
    expect(trackingUrls(String(batchOn!.parsed.html)).clicks).toHaveLength(2);
    expect(String(batchOff!.parsed.html)).not.toContain('/t/c/');

    const invalid = await send(ctx.app, tracked.key, {
      templateId: tracked.templateId,
      to: 'x@example.test',
      trackOpens: 'yes',
    });
    expectError(invalid, 400, 'VALIDATION_ERROR');
  });

  it('a resend keeps the original send’s tracking override', async () => {
    const t = await team();
    const to = `refuse-once-${Date.now()}@example.test`;
    const response = await send(ctx.app, t.key, { templateId: t.templateId, to, trackOpens: true });
    expect(response.statusCode, response.body).toBe(202);
    const failedId = response.json().data.id as string;
    await waitFor(async () =>
      (await emailStatus(ctx.app, t.key, failedId)).status === 'failed' ? true : undefined,
    );
    const resent = await dataOf(
      await dashboardCall(ctx.app, t.owner, 'POST', `/api/logs/${failedId}/resend`),
      202,
    );
    const message = await waitFor(
      async () => smtp.messages.find((m) => m.parsed.headers.get('x-postwright-email-id') === resent.id),
      30_000,
      'the resent message',
    );
    expect(trackingUrls(String(message.parsed.html)).pixel).toContain('/t/o/');
    expect(trackingUrls(String(message.parsed.html)).clicks).toEqual([]);
  });
  it('concurrent hits of the same token record one open and one click', async () => {
    const t = await team({ trackOpens: true, trackClicks: true });
    const { id, html } = await sendAndReceive(t);
    const { pixel, clicks } = trackingUrls(html);
    const responses = await Promise.all([
      ...Array.from({ length: 5 }, () => hit(pixel!)),
      ...Array.from({ length: 5 }, () => hit(clicks[0]!)),
    ]);
    expect(responses.map((r) => r.statusCode).sort()).toEqual([
      200, 200, 200, 200, 200, 302, 302, 302, 302, 302,
    ]);
    const log = await logOf(t, id);
    expect(log.status).toBe('clicked');
    expect(trackedEvents(log)).toEqual(['opened', `clicked ${WELCOME}`]);
  });

  it('a hit answers without waiting for a blocked database and is recorded once it can be', async () => {
    const t = await team({ trackOpens: true });
    const { id, html } = await sendAndReceive(t);
    const { pixel } = trackingUrls(html);
    // Another transaction holds the email's row: the hit's recording waits for it.
    let release!: () => void;
    const held = new Promise<void>((resolve) => (release = resolve));
    let locked!: () => void;
    const lockTaken = new Promise<void>((resolve) => (locked = resolve));
    const blocker = ctx.context.database.db.transaction(async (tx) => {
      await tx.execute(sql`select id from email_logs where id = ${id} for update`);
      locked();
      await held;
    });
    await lockTaken;
    try {
      const started = Date.now();
      const response = await hit(pixel!);
      const waited = Date.now() - started;
      expect(response.statusCode).toBe(200);
      expect(response.headers['content-type']).toBe('image/gif');
      expect(waited).toBeLessThan(RECORD_WAIT_MS + 5_000);
      expect((await logOf(t, id)).status).toBe('sent');
    } finally {
      release();
      await blocker;
    }
    await waitFor(async () => ((await logOf(t, id)).status === 'opened' ? true : undefined));
  });
});
