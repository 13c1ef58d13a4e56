import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { createTestContext, type TestContext, waitFor } from './helpers/app.ts';
import {
  freePort,
  newIdentity,
  type OidcProvider,
  ORIGIN_HEADERS,
  setupOwner,
  signIn,
  signInWithProvider,
  startOidcProvider,
} from './helpers/auth.ts';
import { buildApiKey, buildSmtpAdapter, expectError } from './helpers/factories.ts';
import { startTestSmtpServer, type TestSmtpServer } from './helpers/smtp-server.ts';
import { acceptInvitation, invite, inviteeEmail, tokenOf } from './helpers/teams.ts';

const SETUP_TOKEN = 'test-setup-token-0123456789'; // createTestContext's

/*
 * Issue #8, Low: no secret reaches the logs. A full invitation flow runs with the app's logger at
 * trace level writing into `lines` (a pino destination), with the console (workers, pg-boss,
 * better-auth without a logger) captured into the same place; then the logs are searched for every
 * secret the flow used.
 */
describe('logs of a full invitation flow (PostgreSQL, LOG_LEVEL=trace)', () => {
  const lines: string[] = [];
  let ctx: TestContext;
  let smtp: TestSmtpServer;
  let oidc: OidcProvider;
  let url: string;

  beforeAll(async () => {
    for (const method of ['log', 'info', 'warn', 'error', 'debug', 'trace'] as const) {
      vi.spyOn(console, method).mockImplementation((...args: unknown[]) => {
        lines.push(args.map((a) => (a instanceof Error ? `${a.message}\n${a.stack}` : String(a))).join(' '));
      });
    }
    [oidc, smtp] = await Promise.all([startOidcProvider(), startTestSmtpServer()]);
    url = `http://127.0.0.1:${await freePort()}`;
    ctx = await createTestContext(
      'postgres',
      {
        BASE_URL: url,
        TRUST_PROXY: '1',
        LOG_LEVEL: 'trace',
        ...oidc.env,
      },
      { logStream: { write: (line: string) => void lines.push(line) } },
    );
    await ctx.app.listen({ port: Number(new URL(url).port), host: '127.0.0.1' });
    await ctx.startWorkers();
  });

  afterAll(async () => {
    await ctx?.close();
    await smtp?.close();
    await oidc?.close();
    vi.restoreAllMocks();
  });

  /** The session token inside the `postwright.session_token` cookie of a `cookie` header. */
  function sessionTokenOf(cookie: string): string {
    const value = /postwright\.session_token=([^;]+)/.exec(cookie)?.[1];
    if (!value) throw new Error(`no session cookie in ${cookie}`);
    return decodeURIComponent(value).split('.')[0]!;
  }

  async function emailedToken(email: string, before: number): Promise<string> {
    const message = await waitFor(
      async () => smtp.messages.slice(before).find((m) => m.envelopeTo.includes(email.toLowerCase())),
      20_000,
      `the invitation email to ${email}`,
    );
    return tokenOf(message.parsed.text);
  }

  it('holds none of the secrets the flow used', async () => {
    const app = ctx.app;
    const secrets: Record<string, string> = { 'setup token': SETUP_TOKEN };

    // First-run setup with a password, an API key, an adapter that emails invitations.
    secrets['owner password'] = 'owner password 0f3c9a';
    const owner = await setupOwner(app, { password: secrets['owner password'] });
    secrets['owner session'] = sessionTokenOf(owner.cookie);
    secrets['API key'] = (await buildApiKey(app, owner)).key;
    await buildSmtpAdapter(app, owner, smtp.port);

    // Invitation by email, shown, accepted with a new password; then a password sign-in.
    const emailA = inviteeEmail('logged');
    let before = smtp.messages.length;
    const invited = await invite(app, owner, { email: emailA, role: 'admin' });
    expect(invited.statusCode, invited.body).toBe(201);
    secrets['emailed invitation token'] = await emailedToken(emailA, before);
    const shown = await app.inject({
      method: 'GET',
      url: `/api/auth/invitations/${secrets['emailed invitation token']}`,
    });
    expect(shown.statusCode, shown.body).toBe(200);
    secrets['invitee password'] = 'invitee password 7d1e44';
    const accepted = await acceptInvitation(app, secrets['emailed invitation token'], {
      body: { name: 'Logged Invitee', password: secrets['invitee password'] },
    });
    expect(accepted.statusCode, accepted.body).toBe(201);
    secrets['invitee session'] = sessionTokenOf(accepted.headers['set-cookie']!.toString());
    const again = await signIn(app, emailA, secrets['invitee password']);
    secrets['invitee second session'] = sessionTokenOf(again);
    // A wrong password, an invitation id where a token belongs, an unknown token.
    const wrong = await app.inject({
      method: 'POST',
      url: '/api/auth/sign-in/email',
      headers: ORIGIN_HEADERS(app),
      payload: { email: emailA, password: 'a wrong password 55ab' },
    });
    expect(wrong.statusCode).toBe(401);
    secrets['wrong password'] = 'a wrong password 55ab';
    expectError(
      await app.inject({ method: 'GET', url: `/api/auth/invitations/${invited.json().data.id}` }),
      404,
      'NOT_FOUND',
    );

    // A team without an adapter: the inviter gets the link; it is accepted with a password.
    const lone = await setupOwner(app);
    secrets['second owner session'] = sessionTokenOf(lone.cookie);
    const shownLink = await invite(app, lone, { email: inviteeEmail('linked'), role: 'member' });
    expect(shownLink.json().data.delivery.status).toBe('skipped');
    secrets['shown invitation token'] = tokenOf(shownLink.json().data.url);
    secrets['linked password'] = 'linked password 91be02';
    const linked = await acceptInvitation(app, secrets['shown invitation token'], {
      body: { name: 'Linked Person', password: secrets['linked password'] },
    });
    expect(linked.statusCode, linked.body).toBe(201);

    // An invitee signing in through OpenID Connect, sent back to the invitation page.
    const invitee = newIdentity({ emailVerified: true });
    before = smtp.messages.length;
    expect((await invite(app, owner, { email: invitee.email, role: 'viewer' })).statusCode).toBe(201);
    secrets['OIDC invitation token'] = await emailedToken(invitee.email, before);
    oidc.nextIdentity(invitee);
    const flow = await signInWithProvider(url, 'oidc', {
      redirectTo: `/invite/${secrets['OIDC invitation token']}`,
    });
    expect(flow.location).toBe(`${url}/invite/${secrets['OIDC invitation token']}`);
    secrets['OIDC session'] = sessionTokenOf(flow.cookie);

    // better-auth failing with a database error that carries the statement's parameters.
    const auth = app.ctx.auth as { handler: (request: Request) => Promise<Response> };
    const handler = auth.handler;
    secrets['SQL parameter'] = 'hash-of-a-password-3e8b';
    auth.handler = async () => {
      throw new Error(
        `Failed query: update "accounts" set "password" = $1 where "id" = $2\nparams: ${secrets['SQL parameter']},acc_1`,
      );
    };
    try {
      const failed = await app.inject({ method: 'GET', url: '/api/auth/get-session' });
      expect(failed.statusCode).toBe(500);
    } finally {
      auth.handler = handler;
    }

    await waitFor(async () =>
      lines.some((l) => l.includes('better-auth handler failed')) ? true : undefined,
    );
    const logs = lines.join('\n');
    // The logs are there and at trace level (not silently empty).
    expect(logs).toContain('incoming request');
    expect(logs).toContain('/api/auth/invitations/[redacted]');
    expect(logs).toContain('params: [redacted]');
    for (const [name, secret] of Object.entries(secrets)) {
      expect(secret.length, name).toBeGreaterThan(8);
      expect(logs.includes(secret), `the ${name} appears in the logs`).toBe(false);
    }
  });
});
