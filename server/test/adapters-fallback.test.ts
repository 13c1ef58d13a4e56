import { sql } from 'drizzle-orm';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { createTestContext, type TestContext, waitFor } from './helpers/app.ts';
import { sessionHeaders, setupOwner, type TeamOwner } from './helpers/auth.ts';
import { buildApiKey, buildTemplate, expectError, send, simpleDesign } from './helpers/factories.ts';
import { FAKE_CREDENTIALS, type FakeProvider, startFakeProvider } from './helpers/fake-providers.ts';

/**
 * Adapter fallback (issue #10): `fallbackAdapterId` names an adapter of the same team, without
 * cycles (400 VALIDATION_ERROR otherwise); when the primary fails for a retryable reason on the last
 * attempt, the fallback delivers and the log's adapterId names it.
 */
describe('adapter fallback', () => {
  let ctx: TestContext;
  let owner: TeamOwner;
  let key: string;
  let templateId: string;
  let resend: FakeProvider;
  let postmark: FakeProvider;

  beforeAll(async () => {
    resend = await startFakeProvider('resend');
    postmark = await startFakeProvider('postmark');
    ctx = await createTestContext('postgres', {
      SEND_RETRY_LIMIT: '1',
      SEND_RETRY_DELAY_SECONDS: '1',
      PROVIDER_ENDPOINT_RESEND: resend.url,
      PROVIDER_ENDPOINT_POSTMARK: postmark.url,
    });
    await ctx.startWorkers();
  });
  // Every case gets a team of its own (CONVENTIONS.md): its adapters, its default adapter, key and
  // template. No adapter yet: each sending case makes its own chain and marks its head default.
  // The app, database and fake providers are the file's.
  beforeEach(async () => {
    owner = await setupOwner(ctx.app);
    key = (await buildApiKey(ctx.app, owner)).key;
    templateId = (await buildTemplate(ctx.app, owner, { name: 'Fallback', designJson: simpleDesign('Hi') }))
      .id;
  });

  afterAll(async () => {
    await ctx?.close();
    await resend?.close();
    await postmark?.close();
  });

  const api = (method: 'GET' | 'POST' | 'PUT' | 'DELETE', url: string, payload?: object) =>
    ctx.app.inject({ method, url, headers: sessionHeaders(ctx.app, owner), ...(payload ? { payload } : {}) });

  const createAdapter = async (body: Record<string, unknown>) => {
    const response = await api('POST', '/api/adapters', {
      defaultFrom: 'Postwright Test <sender@postwright.test>',
      ...body,
    });
    expect(response.statusCode, response.body).toBe(201);
    const { id } = response.json().data as { id: string };
    return (await api('GET', `/api/adapters/${id}`)).json().data as {
      id: string;
      fallbackAdapterId: string | null;
    };
  };

  const postmarkAdapter = (name: string) =>
    createAdapter({ name, type: 'mailapi_server', config: FAKE_CREDENTIALS.postmark });

  it('accepts an adapter of the same team and shows it; refuses unknown ids, itself and cycles', async () => {
    const a = await postmarkAdapter('A');
    const b = await createAdapter({
      name: 'B',
      type: 'mailapi_server',
      config: FAKE_CREDENTIALS.postmark,
      fallbackAdapterId: a.id,
    });
    expect(b.fallbackAdapterId).toBe(a.id);
    expect((await api('GET', `/api/adapters/${b.id}`)).json().data.fallbackAdapterId).toBe(a.id);

    const unknown = await api('POST', '/api/adapters', {
      name: 'C',
      type: 'mailapi_server',
      config: FAKE_CREDENTIALS.postmark,
      fallbackAdapterId: 'adapter_doesnotexist',
    });
    expect(expectError(unknown, 400, 'VALIDATION_ERROR').details.issues[0].path).toBe('fallbackAdapterId');

    expectError(
      await api('PUT', `/api/adapters/${a.id}`, { fallbackAdapterId: a.id }),
      400,
      'VALIDATION_ERROR',
    );
    // A → B would close the cycle B → A → B.
    const cycle = await api('PUT', `/api/adapters/${a.id}`, { fallbackAdapterId: b.id });
    expect(expectError(cycle, 400, 'VALIDATION_ERROR').details.issues[0].message).toMatch(/loop/);

    const cleared = await api('PUT', `/api/adapters/${b.id}`, { fallbackAdapterId: null });
    expect(cleared.statusCode, cleared.body).toBe(200);
    expect((await api('GET', `/api/adapters/${b.id}`)).json().data.fallbackAdapterId).toBeNull();
    // With B → A gone, A → B is fine.
    expect((await api('PUT', `/api/adapters/${a.id}`, { fallbackAdapterId: b.id })).statusCode).toBe(200);
  });

  it('refuses a fallback chain longer than 100 adapters, so no loop closes behind the checked part', async () => {
    // Review finding, session 16: the cycle check stopped after 100 steps and let the change through.
    const first = await postmarkAdapter('Chain 0');
    let last = first;
    for (let i = 1; i <= 100; i++) {
      const response = await api('POST', '/api/adapters', {
        name: `Chain ${i}`,
        type: 'mailapi_server',
        config: FAKE_CREDENTIALS.postmark,
        fallbackAdapterId: last.id,
      });
      expect(response.statusCode, response.body).toBe(201);
      last = response.json().data;
    }
    // `last` starts a chain of 101: closing the loop first → last is refused, as is any longer chain.
    const loop = await api('PUT', `/api/adapters/${first.id}`, { fallbackAdapterId: last.id });
    expectError(loop, 400, 'VALIDATION_ERROR');
    const longer = await api('POST', '/api/adapters', {
      name: 'Chain 101',
      type: 'mailapi_server',
      config: FAKE_CREDENTIALS.postmark,
      fallbackAdapterId: last.id,
    });
    expect(expectError(longer, 400, 'VALIDATION_ERROR').details.issues[0].message).toMatch(/at most 100/);
  });

  it('deleting the fallback clears it on the adapters that named it', async () => {
    const target = await postmarkAdapter('Target');
    const primary = await createAdapter({
      name: 'Primary',
      type: 'mailapi_server',
      config: FAKE_CREDENTIALS.postmark,
      fallbackAdapterId: target.id,
    });
    expect((await api('DELETE', `/api/adapters/${target.id}`)).statusCode).toBe(200);
    expect((await api('GET', `/api/adapters/${primary.id}`)).json().data.fallbackAdapterId).toBeNull();
  });

  it('naming a fallback while it is being deleted answers 200 or 400, never 500 (review finding, session 14)', async () => {
    // The delete did not take the team's adapter lock: it could commit between the update's
    // fallback check and its write, whose foreign key then failed (9 of 30 rounds were 500).
    const statuses: number[] = [];
    for (let round = 0; round < 20; round++) {
      const target = await postmarkAdapter(`Target ${round}`);
      const primary = await postmarkAdapter(`Primary ${round}`);
      const [update, removal] = await Promise.all([
        api('PUT', `/api/adapters/${primary.id}`, { fallbackAdapterId: target.id }),
        api('DELETE', `/api/adapters/${target.id}`),
      ]);
      statuses.push(update.statusCode, removal.statusCode);
      expect(removal.statusCode, removal.body).toBe(200);
      expect([200, 400], update.body).toContain(update.statusCode);
      // Either way no adapter names a deleted one.
      expect((await api('GET', `/api/adapters/${primary.id}`)).json().data.fallbackAdapterId).toBeNull();
    }
    expect(statuses).not.toContain(500);
  });

  const settled = (id: string) =>
    waitFor(async () => {
      const log = (await api('GET', `/api/logs/${id}`)).json().data;
      return ['sent', 'failed'].includes(log.status) ? log : undefined;
    }, 30_000);

  it('delivers through the fallback when the primary keeps failing with a 5xx, and records it', async () => {
    const fallback = await postmarkAdapter('Fallback Postmark');
    const primary = await createAdapter({
      name: 'Primary Resend',
      type: 'mailapi_a',
      config: FAKE_CREDENTIALS.resend,
      isDefault: true,
      fallbackAdapterId: fallback.id,
    });
    resend.failNextSends(
      { status: 503, message: 'Resend is down' },
      { status: 503, message: 'Resend is still down' },
    );
    const resendBefore = resend.sends().length;
    const postmarkBefore = postmark.sends().length;
    const response = await send(ctx.app, key, { templateId, to: 'fallback@example.test' });
    expect(response.statusCode, response.body).toBe(202);
    const log = await settled(response.json().data.id);
    expect(log.status, log.errorMessage).toBe('sent');
    expect(log.adapterId).toBe(fallback.id);
    expect(resend.sends().length - resendBefore).toBe(2); // first attempt + the one retry
    expect(postmark.sends().length - postmarkBefore).toBe(1);
    expect(postmark.sends().at(-1)!.json.To).toBe('fallback@example.test');

    // A permanent (4xx) failure of the primary does not fall back.
    resend.failNextSends({ status: 422, message: 'Invalid `to` field' });
    const rejected = await send(ctx.app, key, { templateId, to: 'rejected@example.test' });
    const failed = await settled(rejected.json().data.id);
    expect(failed.status).toBe('failed');
    expect(failed.errorMessage).toBe('Invalid `to` field');
    expect(failed.adapterId).toBe(primary.id);
    expect(postmark.sends().length - postmarkBefore).toBe(1);
  });

  it('a fallback that delivered is not followed by the next one when recording it fails (sent once, status sent)', async () => {
    // Review finding, session 15: the write of the delivering adapter sat in the same try as the
    // send, so its failure counted as the fallback failing: the next fallback delivered again.
    const last = await postmarkAdapter('Second fallback');
    const first = await createAdapter({
      name: 'First fallback',
      type: 'mailapi_server',
      config: FAKE_CREDENTIALS.postmark,
      fallbackAdapterId: last.id,
    });
    const primary = await createAdapter({
      name: 'Failing primary',
      type: 'mailapi_a',
      config: FAKE_CREDENTIALS.resend,
      isDefault: true,
      fallbackAdapterId: first.id,
    });
    const db = ctx.app.ctx.database.db;
    await db.execute(
      sql.raw(`create or replace function refuse_fallback_record() returns trigger
      language plpgsql as $$ begin raise exception 'recording the adapter is refused for this test'; end $$`),
    );
    await db.execute(
      sql.raw(`create trigger refuse_fallback_record before update of adapter_id on email_logs for each row
        when (new.adapter_id = '${first.id}') execute function refuse_fallback_record()`),
    );
    try {
      resend.failNextSends({ status: 503, message: 'down' }, { status: 503, message: 'still down' });
      const postmarkBefore = postmark.sends().length;
      const response = await send(ctx.app, key, { templateId, to: 'once@example.test' });
      const log = await settled(response.json().data.id);
      expect(log.status, log.errorMessage).toBe('sent');
      expect(log.adapterId).toBe(primary.id);
      expect(postmark.sends().length - postmarkBefore).toBe(1);
    } finally {
      await db.execute(sql.raw('drop trigger refuse_fallback_record on email_logs'));
    }
  });

  it('skips a disabled fallback for its own fallback; when every adapter fails, the log names each error', async () => {
    const last = await postmarkAdapter('Last resort');
    const disabled = await createAdapter({
      name: 'Disabled middle',
      type: 'mailapi_server',
      config: FAKE_CREDENTIALS.postmark,
      fallbackAdapterId: last.id,
    });
    expect((await api('PUT', `/api/adapters/${disabled.id}`, { isActive: false })).statusCode).toBe(200);
    await createAdapter({
      name: 'Chain head',
      type: 'mailapi_a',
      config: FAKE_CREDENTIALS.resend,
      isDefault: true,
      fallbackAdapterId: disabled.id,
    });

    resend.failNextSends(
      { status: 500, message: 'Resend 500 one' },
      { status: 500, message: 'Resend 500 two' },
    );
    const delivered = await send(ctx.app, key, { templateId, to: 'chain@example.test' });
    const log = await settled(delivered.json().data.id);
    expect(log.status, log.errorMessage).toBe('sent');
    expect(log.adapterId).toBe(last.id);

    resend.failNextSends(
      { status: 500, message: 'Resend 500 three' },
      { status: 500, message: 'Resend 500 four' },
    );
    postmark.failNextSends({ status: 500, message: 'Postmark is down too' });
    const lost = await send(ctx.app, key, { templateId, to: 'nobody-up@example.test' });
    const failed = await settled(lost.json().data.id);
    expect(failed.status).toBe('failed');
    expect(failed.errorMessage).toBe('Resend 500 four; fallback Last resort: Postmark is down too');
  });
});
