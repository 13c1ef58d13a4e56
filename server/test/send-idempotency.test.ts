import { sql } from 'drizzle-orm';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { sweepExpired, withIdempotency } from '../src/modules/emails/idempotency.ts';
import { createTestContext, type TestContext } from './helpers/app.ts';
import type { TeamOwner } from './helpers/auth.ts';
import { buildApiKey, expectError } from './helpers/factories.ts';
import { createTeamWithKey } from './helpers/sending-team.ts';

/** Issue #10: `Idempotency-Key` on POST /api/v1/send and /api/v1/send/batch. */
describe('Idempotency-Key', () => {
  let ctx: TestContext;
  let owner: TeamOwner;
  let apiKey: string;
  let keyId: string;
  let templateId: string;

  // Workers are not started: the emails stay queued, only what the API accepted is counted.
  beforeAll(async () => {
    ctx = await createTestContext('postgres');
  });
  // Every case gets a team of its own (CONVENTIONS.md): its API key, hence its idempotency keys,
  // and its emails, which the counts below are scoped to. The app and database are the file's.
  beforeEach(async () => {
    ({ owner, key: apiKey, keyId, templateId } = await createTeamWithKey(ctx.app));
  });
  afterAll(() => ctx?.close());

  const post = (key: string, idempotencyKey: string | undefined, body: object, url = '/api/v1/send') =>
    ctx.app.inject({
      method: 'POST',
      url,
      headers: {
        'x-api-key': key,
        ...(idempotencyKey !== undefined ? { 'idempotency-key': idempotencyKey } : {}),
      },
      payload: body,
    });

  /** How many emails of this case's team went to `address`. */
  async function emailsTo(address: string): Promise<number> {
    const result = (await ctx.app.ctx.database.db.execute(
      sql`select count(*)::int as n from email_logs
        where team_id = ${owner.teamId} and ${address} = any(to_addresses)`,
    )) as unknown as { rows: { n: number }[] };
    return result.rows[0]!.n;
  }

  it('answers a repeat with the same body with the original response, without a second email', async () => {
    const body = { templateId, to: 'once@example.test', variables: { first_name: 'Ada' } };
    const first = await post(apiKey, 'order-1', body);
    expect(first.statusCode, first.body).toBe(202);
    // Same body, keys in another order.
    const again = await post(apiKey, 'order-1', {
      variables: { first_name: 'Ada' },
      to: 'once@example.test',
      templateId,
    });
    expect(again.statusCode).toBe(202);
    expect(again.json()).toEqual(first.json());
    expect(again.headers['idempotency-replayed']).toBe('true');
    expect(await emailsTo('once@example.test')).toBe(1);
  });

  it('replays the very bytes of the first answer: a success, a client error, a batch with an error item', async () => {
    // Review finding, session 15: the stored answer sat in a jsonb column, which reorders keys, so
    // a replay was equal as JSON but not as bytes (clients hashing or signing bodies saw a change).
    const single = { templateId, to: 'bytes@example.test' };
    const failing = { templateId: 'tpl_unknown', to: 'bytes@example.test' };
    const batch = { emails: [single, failing, { to: 'no-template@example.test' }] };
    for (const [key, body, url] of [
      ['bytes-1', single, '/api/v1/send'],
      ['bytes-2', failing, '/api/v1/send'],
      ['bytes-3', batch, '/api/v1/send/batch'],
    ] as const) {
      const first = await post(apiKey, key, body, url);
      const again = await post(apiKey, key, body, url);
      expect(again.headers['idempotency-replayed']).toBe('true');
      expect(again.statusCode).toBe(first.statusCode);
      expect(again.body).toBe(first.body);
      expect(again.headers['content-type']).toBe(first.headers['content-type']);
    }
  });

  it('answers 409 CONFLICT for the same key with a different body', async () => {
    const first = await post(apiKey, 'order-2', { templateId, to: 'a2@example.test' });
    expect(first.statusCode, first.body).toBe(202);
    const error = expectError(
      await post(apiKey, 'order-2', { templateId, to: 'b2@example.test' }),
      409,
      'CONFLICT',
    );
    expect(error.details.reason).toBe('KEY_REUSED');
    expect(await emailsTo('b2@example.test')).toBe(0);
  });

  it('keeps keys per API key', async () => {
    const otherKey = (await buildApiKey(ctx.app, owner, { rateLimit: 10_000 })).key;
    const body = { templateId, to: 'perkey@example.test' };
    expect((await post(apiKey, 'shared', body)).statusCode).toBe(202);
    expect((await post(otherKey, 'shared', body)).statusCode).toBe(202);
    expect(await emailsTo('perkey@example.test')).toBe(2);
  });

  it('sends exactly one email for concurrent duplicates', async () => {
    const body = { templateId, to: 'race@example.test' };
    const responses = await Promise.all(Array.from({ length: 12 }, () => post(apiKey, 'race-1', body)));
    for (const response of responses) expect(response.statusCode, response.body).toBe(202);
    const ids = new Set(responses.map((r) => r.json().data.id));
    expect(ids.size).toBe(1);
    expect(await emailsTo('race@example.test')).toBe(1);
  });

  it('replays a client error too, and lets a request without the key through every time', async () => {
    const bad = { templateId: 'no-such-template', to: 'err@example.test' };
    const first = expectError(await post(apiKey, 'bad-1', bad), 400, 'INVALID_TEMPLATE');
    const again = expectError(await post(apiKey, 'bad-1', bad), 400, 'INVALID_TEMPLATE');
    expect(again).toEqual(first);
    const plain = { templateId, to: 'nokey@example.test' };
    expect((await post(apiKey, undefined, plain)).statusCode).toBe(202);
    expect((await post(apiKey, undefined, plain)).statusCode).toBe(202);
    expect(await emailsTo('nokey@example.test')).toBe(2);
  });

  it('forgets a key after 24 hours', async () => {
    const body = { templateId, to: 'expired@example.test' };
    expect((await post(apiKey, 'old', body)).statusCode).toBe(202);
    await ctx.app.ctx.database.db.execute(
      sql`update idempotency_keys set expires_at = now() - interval '1 second'
        where team_id = ${owner.teamId} and key = 'old'`,
    );
    const again = await post(apiKey, 'old', body);
    expect(again.statusCode).toBe(202);
    expect(again.headers['idempotency-replayed']).toBeUndefined();
    expect(await emailsTo('expired@example.test')).toBe(2);
  });

  it('takes over a claim abandoned without a response for 5 minutes (its process died)', async () => {
    const body = { templateId, to: 'abandoned@example.test' };
    expect((await post(apiKey, 'crashed', body)).statusCode).toBe(202);
    const { db } = ctx.app.ctx.database;
    await db.execute(sql`update idempotency_keys set response_status = null, response_body = null,
      created_at = now() - interval '6 minutes' where team_id = ${owner.teamId} and key = 'crashed'`);
    const again = await post(apiKey, 'crashed', body);
    expect(again.statusCode, again.body).toBe(202);
    expect(again.headers['idempotency-replayed']).toBeUndefined();
    expect(await emailsTo('abandoned@example.test')).toBe(2);
  });

  it('sweeps expired keys and keeps live ones', async () => {
    const { db } = ctx.app.ctx.database;
    expect((await post(apiKey, 'sweep-live', { templateId, to: 'sweep@example.test' })).statusCode).toBe(202);
    expect((await post(apiKey, 'sweep-old', { templateId, to: 'sweep@example.test' })).statusCode).toBe(202);
    await db.execute(
      sql`update idempotency_keys set expires_at = now() - interval '1 second'
        where team_id = ${owner.teamId} and key = 'sweep-old'`,
    );
    await sweepExpired(db);
    const keys = (
      (await db.execute(
        sql`select key from idempotency_keys where team_id = ${owner.teamId} and key like 'sweep-%'`,
      )) as unknown as {
        rows: { key: string }[];
      }
    ).rows.map((row) => row.key);
    expect(keys).toEqual(['sweep-live']);
  });

  it('refuses a key over 256 characters with 400 VALIDATION_ERROR', async () => {
    expectError(
      await post(apiKey, 'k'.repeat(257), { templateId, to: 'long@example.test' }),
      400,
      'VALIDATION_ERROR',
    );
    expect((await post(apiKey, 'k'.repeat(256), { templateId, to: 'long@example.test' })).statusCode).toBe(
      202,
    );
  });

  it('applies to the batch endpoint, apart from single sends with the same key', async () => {
    const batch = { emails: [{ templateId, to: 'batch-idem@example.test' }] };
    const first = await post(apiKey, 'batch-1', batch, '/api/v1/send/batch');
    expect(first.statusCode, first.body).toBe(202);
    const again = await post(apiKey, 'batch-1', batch, '/api/v1/send/batch');
    expect(again.json()).toEqual(first.json());
    expect(await emailsTo('batch-idem@example.test')).toBe(1);
    expectError(await post(apiKey, 'batch-1', batch.emails[0]!), 409, 'CONFLICT');
  });

  /** The stored answer of this case's key `key`: status null while the first request runs. */
  async function storedResponseStatus(key: string): Promise<number | null | undefined> {
    const result = (await ctx.app.ctx.database.db.execute(
      sql`select response_status from idempotency_keys where team_id = ${owner.teamId} and key = ${key}`,
    )) as unknown as { rows: { response_status: number | null }[] };
    return result.rows[0]?.response_status;
  }

  it('keeps the answer of a batch whose item echoes a lone surrogate, and never sends its valid email twice', async () => {
    const batch = {
      emails: [
        { templateId, to: 'surrogate-ok@example.test' },
        { templateId: '\ud800x', to: 'surrogate-bad@example.test' },
      ],
    };
    const first = await post(apiKey, 'k1', batch, '/api/v1/send/batch');
    expect(first.statusCode, first.body).toBe(202);
    const [accepted, refused] = first.json().data.results;
    expect(accepted).toMatchObject({ status: 'queued' });
    expect(refused.error.code).toBe('VALIDATION_ERROR');
    expect(refused.error.details.issues.map((i: { path: string }) => i.path)).toContain(
      'body.emails.1.templateId',
    );
    expect(await storedResponseStatus('k1')).toBe(202);
    const started = Date.now();
    const again = await post(apiKey, 'k1', batch, '/api/v1/send/batch');
    expect(again.statusCode, again.body).toBe(202);
    expect(again.headers['idempotency-replayed']).toBe('true');
    expect(again.json()).toEqual(first.json());
    expect(Date.now() - started).toBeLessThan(5_000);
    expect(await emailsTo('surrogate-ok@example.test')).toBe(1);
  });

  it('answers a single send with a lone surrogate in templateId 400 VALIDATION_ERROR, the same each time', async () => {
    const body = { templateId: '\ud800x', to: 'surrogate-single@example.test' };
    const first = expectError(await post(apiKey, 'k2', body), 400, 'VALIDATION_ERROR');
    expect(first.details.issues.map((i: { path: string }) => i.path)).toContain('body.templateId');
    const again = expectError(await post(apiKey, 'k2', body), 400, 'VALIDATION_ERROR');
    expect(again).toEqual(first);
    expect(await emailsTo('surrogate-single@example.test')).toBe(0);
  });

  it('never takes over the claim of a first request still running past 5 minutes (its claim is refreshed)', async () => {
    // Review finding, session 15: a send rendering several slow PDFs may run longer than the
    // abandonment bound; a repeat then took the live claim over and sent a second email.
    const { db } = ctx.app.ctx.database;
    const scope = { apiKeyId: keyId, teamId: owner.teamId };
    const request = { route: 'send', body: { templateId: 'slow' } };
    let finish: () => void = () => {};
    const running = new Promise<void>((resolve) => {
      finish = resolve;
    });
    let runs = 0;
    const run = async () => {
      runs++;
      await running;
      return { status: 202, body: { success: true, data: { id: `eml_${runs}` } } };
    };
    const first = withIdempotency(db, scope, 'slow-1', request, run, { claimRefreshMs: 50 });
    await new Promise((resolve) => setTimeout(resolve, 20));
    // 6 minutes pass without an answer (its runs are slow, its process alive).
    await db.execute(sql`update idempotency_keys set created_at = now() - interval '6 minutes'
      where team_id = ${owner.teamId} and key = 'slow-1'`);
    await new Promise((resolve) => setTimeout(resolve, 200));
    const repeat = withIdempotency(db, scope, 'slow-1', request, run, { claimRefreshMs: 50 });
    await new Promise((resolve) => setTimeout(resolve, 100));
    finish();
    expect(await first).toMatchObject({ status: 202, replayed: false });
    expect(await repeat).toMatchObject({
      status: 202,
      body: { success: true, data: { id: 'eml_1' } },
      replayed: true,
    });
    expect(runs).toBe(1);
  });

  it('stores an answer holding a lone surrogate or NUL, and replays it without running again', async () => {
    const { db } = ctx.app.ctx.database;
    const scope = { apiKeyId: keyId, teamId: owner.teamId };
    const request = { route: 'send', body: { templateId: 'echo' } };
    let runs = 0;
    const run = async () => {
      runs++;
      return {
        status: 400,
        body: { success: false, error: { code: 'NOT_FOUND', message: 'Template "\ud800x\u0000" not found' } },
      };
    };
    const first = await withIdempotency(db, scope, 'echo-1', request, run);
    expect(first).toMatchObject({ status: 400, replayed: false });
    expect((first.body as { error: { message: string } }).error.message).toBe(
      'Template "\ud800x\u0000" not found',
    );
    expect(await storedResponseStatus('echo-1')).toBe(400);
    const again = await withIdempotency(db, scope, 'echo-1', request, run);
    const replayed = {
      success: false,
      error: { code: 'NOT_FOUND', message: 'Template "\ufffdx\ufffd" not found' },
    };
    expect(again).toEqual({ status: 400, body: replayed, replayed: true });
    expect(runs).toBe(1);
  });

  it('answers what the first run did even when its answer cannot be stored', async () => {
    const { db } = ctx.app.ctx.database;
    const scope = { apiKeyId: keyId, teamId: owner.teamId };
    // JSON cannot carry a BigInt: storing this answer fails after the run committed its work.
    const unstorable = { status: 202, body: { success: true, data: { id: 'email_1', count: 1n } } };
    const answer = await withIdempotency(
      db,
      scope,
      'unstorable',
      { route: 'send', body: {} },
      async () => unstorable,
    );
    expect(answer).toEqual({ ...unstorable, replayed: false });
  });
});
