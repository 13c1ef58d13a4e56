import { sql } from 'drizzle-orm';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { createTestContext, type TestContext } from './helpers/app.ts';
import { ORIGIN_HEADERS, sessionHeaders, setupOwner, type TeamOwner } from './helpers/auth.ts';
import { expectError } from './helpers/factories.ts';

/*
 * Errors inside better-auth's own endpoints (/api/auth/*) are answered in our envelope and logged
 * redacted: a value the database refuses is the client's 400, and a database failure is a 500
 * whose log holds no statement values (session tokens, password hashes). Before, better-call's
 * router printed such errors whole to the console ("# SERVER_ERROR") and answered a bare 500.
 */
describe('errors inside better-auth endpoints', () => {
  const consoleLines: string[] = [];
  const logLines: string[] = [];
  let ctx: TestContext;
  let owner: TeamOwner;

  beforeAll(async () => {
    for (const method of ['log', 'info', 'warn', 'error', 'debug'] as const) {
      vi.spyOn(console, method).mockImplementation((...args: unknown[]) => {
        consoleLines.push(
          args.map((a) => (a instanceof Error ? `${a.message}\n${a.stack}` : String(a))).join(' '),
        );
      });
    }
    ctx = await createTestContext(
      'postgres',
      { LOG_LEVEL: 'info' },
      {
        logStream: { write: (line: string) => void logLines.push(line) },
      },
    );
    owner = await setupOwner(ctx.app, { password: 'owner password 5e1d77' });
  });
  afterAll(async () => {
    await ctx?.close();
    vi.restoreAllMocks();
  });

  it('answers 400 UNSUPPORTED_DATA to a NUL byte in update-user, and prints nothing', async () => {
    const response = await ctx.app.inject({
      method: 'POST',
      url: '/api/auth/update-user',
      headers: sessionHeaders(ctx.app, owner),
      payload: { name: 'a\u0000b' },
    });
    const error = expectError(response, 400, 'INVALID_INPUT');
    expect(error.details).toMatchObject({ reason: 'UNSUPPORTED_DATA' });
    expect(consoleLines.join('\n')).not.toContain('SERVER_ERROR');
  });

  it('update-user takes only a name of 1-100 characters (was: any JSON value of any length; a null name was a 500), the name kept', async () => {
    const nameOf = async () =>
      (
        await ctx.app.inject({ method: 'GET', url: '/api/auth/me', headers: sessionHeaders(ctx.app, owner) })
      ).json().data.user.name;
    const before = await nameOf();
    const refused = [
      { name: null },
      { name: 'A'.repeat(101) },
      { name: '   ' },
      { name: { a: 1 } },
      { name: ['x', 'y'] },
      { name: 5 },
      { image: 'https://example.test/a.png' },
      { name: 'Fine', image: { a: 1 } },
      { name: 'Fine', emailVerified: true },
    ];
    for (const payload of refused) {
      const response = await ctx.app.inject({
        method: 'POST',
        url: '/api/auth/update-user',
        headers: sessionHeaders(ctx.app, owner),
        payload,
      });
      expectError(response, 400, 'VALIDATION_ERROR');
    }
    expect(await nameOf()).toBe(before);
    const renamed = await ctx.app.inject({
      method: 'POST',
      url: '/api/auth/update-user',
      headers: sessionHeaders(ctx.app, owner),
      payload: { name: '  Grace Hopper  ' },
    });
    expect(renamed.statusCode, renamed.body).toBe(200);
    expect(await nameOf()).toBe('Grace Hopper');
  });

  it('answers a database failure with a 500 in the envelope, its statement values kept out of every log', async () => {
    const db = ctx.app.ctx.database.db;
    await db.execute(sql`create function refuse_sessions() returns trigger language plpgsql as $$
      begin raise exception 'sessions are refused for this test'; end $$`);
    await db.execute(
      sql`create trigger refuse_sessions before insert on sessions for each row execute function refuse_sessions()`,
    );
    try {
      const response = await ctx.app.inject({
        method: 'POST',
        url: '/api/auth/sign-in/email',
        headers: ORIGIN_HEADERS(ctx.app),
        payload: { email: owner.email, password: 'owner password 5e1d77' },
      });
      expectError(response, 500, 'INTERNAL_ERROR');
    } finally {
      await db.execute(sql`drop trigger refuse_sessions on sessions`);
      await db.execute(sql`drop function refuse_sessions()`);
    }
    const everything = [...consoleLines, ...logLines].join('\n');
    expect(everything).not.toContain('SERVER_ERROR');
    // Logged once, by the mount, redacted.
    expect(everything).toContain('better-auth handler failed');
    expect(everything).toContain('insert into \\"sessions\\"');
    // The failed insert's values (the new session's token among them) never reach a log.
    expect(everything).not.toMatch(/params: (?!\[redacted\])/);
  });
});
