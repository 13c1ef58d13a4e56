import { sql } from 'drizzle-orm';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { signTrackingToken, trackingKey } from '../src/tracking/tokens.ts';
import { createTestContext, type TestContext, waitFor } from './helpers/app.ts';
import { send } from './helpers/factories.ts';
import { createTeamWithKey } from './helpers/sending-team.ts';

/**
 * Issue #11: the pixel and the redirect never fail visibly for a valid token, and answer the same
 * whether or not the email exists (a token proves its email id, nothing more is told).
 * Own database: one case breaks it.
 */
describe('tracking endpoints when the email is unknown or the database fails', () => {
  let ctx: TestContext;
  let key: Buffer;

  beforeAll(async () => {
    ctx = await createTestContext('postgres');
    key = trackingKey(ctx.context.encryptionKey);
  });

  afterAll(async () => {
    await ctx?.close();
  });

  const claims = (emailId: string) => ({
    open: signTrackingToken(key, { kind: 'open', emailId, teamId: 'team_unknown' }),
    click: signTrackingToken(key, {
      kind: 'click',
      emailId,
      teamId: 'team_unknown',
      url: 'https://example.com/a',
    }),
  });

  async function expectServed(emailId: string) {
    const { open, click } = claims(emailId);
    const pixel = await ctx.app.inject({ method: 'GET', url: `/t/o/${open}` });
    expect(pixel.statusCode, pixel.body).toBe(200);
    expect(pixel.headers['content-type']).toBe('image/gif');
    const redirect = await ctx.app.inject({ method: 'GET', url: `/t/c/${click}` });
    expect(redirect.statusCode, redirect.body).toBe(302);
    expect(redirect.headers.location).toBe('https://example.com/a');
  }

  it('declares the /t routes public in the route access table', () => {
    const tracking = ctx.app.ctx.routes
      .filter((route) => route.url.startsWith('/t/') && route.method === 'GET')
      .map((route) => [route.url, route.access]);
    expect(tracking).toEqual([
      ['/t/o/*', { kind: 'public' }],
      ['/t/c/*', { kind: 'public' }],
    ]);
  });

  it('accepts a token only as it was signed: other spellings of its signature are 404 (review finding, session 22)', async () => {
    const { open, click } = claims('eml_spellings');
    const respell = (token: string) => {
      const last = token.at(-1)!;
      // The last of 43 base64url characters carries 4 bits of the signature and 2 unused ones.
      const alphabet = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_';
      const sameBits = alphabet[alphabet.indexOf(last) ^ 1]!;
      return [`${token}=`, `${token}!`, `${token}%20`, `${token.slice(0, -1)}${sameBits}`];
    };
    for (const [path, token] of [
      ['/t/o/', open],
      ['/t/c/', click],
    ] as const) {
      expect((await ctx.app.inject({ method: 'GET', url: `${path}${token}` })).statusCode).not.toBe(404);
      for (const variant of respell(token)) {
        const response = await ctx.app.inject({ method: 'GET', url: `${path}${variant}` });
        expect(response.statusCode, variant).toBe(404);
        expect(response.json().error.code).toBe('NOT_FOUND');
        expect(response.headers.location).toBeUndefined();
      }
    }
  });

  it('a valid token of an email that does not exist is served like any other', async () => {
    await expectServed('eml_doesnotexist');
  });

  it('a database error still returns the pixel and the redirect for a valid token', async () => {
    const db = ctx.context.database.db;
    await db.execute(sql`alter table email_logs rename to email_logs_gone`);
    try {
      await expectServed('eml_whatever');
    } finally {
      await db.execute(sql`alter table email_logs_gone rename to email_logs`);
    }
  });
});

/**
 * Security review, session 12: a click token carries the link it redirects to, often a
 * password-reset or sign-in link. When recording the hit failed, the database error was logged
 * whole, and Drizzle's error holds the statement's parameters: the link, twice.
 */
describe('a click that cannot be recorded keeps its link out of the logs', () => {
  const lines: string[] = [];
  let ctx: TestContext;

  beforeAll(async () => {
    ctx = await createTestContext(
      'postgres',
      { LOG_LEVEL: 'warn' },
      { logStream: { write: (line: string) => void lines.push(line) } },
    );
  });
  afterAll(async () => {
    await ctx?.close();
  });

  it('logs the failure without the statement values', async () => {
    const team = await createTeamWithKey(ctx.app);
    const sent = await send(ctx.app, team.key, { templateId: team.templateId, to: 'ann@example.com' });
    expect(sent.statusCode, sent.body).toBe(202);
    const emailId = sent.json().data.id as string;
    const secretUrl = 'https://example.com/reset-password?token=RESET-SECRET-9f8e7d6c';
    const token = signTrackingToken(trackingKey(ctx.context.encryptionKey), {
      kind: 'click',
      emailId,
      teamId: team.owner.teamId,
      url: secretUrl,
    });
    // Any failure of the insert (a deadlock, a timeout, a full disk): here a constraint.
    const db = ctx.context.database.db;
    await db.execute(
      sql`alter table email_events add constraint refuse_clicks check (status <> 'clicked') not valid`,
    );
    try {
      const hit = await ctx.app.inject({ method: 'GET', url: `/t/c/${token}` });
      expect(hit.statusCode).toBe(302);
      expect(hit.headers.location).toBe(secretUrl);
      const line = await waitFor(
        async () => lines.find((l) => l.includes('tracking hit not recorded')),
        5_000,
        'the log line of the failed recording',
      );
      expect(line).toContain('"code":"23514"'); // still tells what failed (a check violation)
      expect(line).not.toContain('RESET-SECRET-9f8e7d6c');
    } finally {
      await db.execute(sql`alter table email_events drop constraint refuse_clicks`);
    }
  });
});
