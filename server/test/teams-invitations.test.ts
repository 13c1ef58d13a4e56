import { randomBytes } from 'node:crypto';
import { createServer, type Socket } from 'node:net';
import { eq } from 'drizzle-orm';
import { TypeID } from 'typeid-js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { invitations, members, users } from '../src/db/schema/index.ts';
import { newUnguessableId } from '../src/ids.ts';
import { INVITATION_SEND_JOB, type JobPayload } from '../src/jobs/definitions.ts';
import { insertMember, insertTeam, insertUserWithPassword } from '../src/modules/auth/auth.repository.ts';
import { createSendInvitationHandler } from '../src/modules/teams/index.ts';
import { hashInvitationToken, newInvitationToken } from '../src/modules/teams/invitation-token.ts';
import { teamRepository } from '../src/modules/teams/teams.repository.ts';
import { SMTP_TIMEOUTS_MS } from '../src/providers/smtp.ts';
import { createTestContext, type TestContext, waitFor } from './helpers/app.ts';
import {
  addTeamMember,
  cookieHeaderFrom,
  freePort,
  newIdentity,
  type OidcProvider,
  sessionHeaders,
  setupOwner,
  signIn,
  signInWithProvider,
  startOidcProvider,
} from './helpers/auth.ts';
import { buildApiKey, buildSmtpAdapter, expectError } from './helpers/factories.ts';
import { startTestSmtpServer, type TestSmtpServer } from './helpers/smtp-server.ts';
import {
  acceptInvitation,
  asUser,
  buildInvitation,
  invite,
  inviteeEmail,
  listMembers,
  tokenOf,
} from './helpers/teams.ts';

const DAY_MS = 24 * 60 * 60 * 1000;

/** The UUID inside an `inv_…` TypeID, as 32 lowercase hex digits. */
function invitationUuidHex(id: string): string {
  expect(id).toMatch(/^inv_[0-9a-z]{26}$/);
  return TypeID.fromString(id, 'inv').toUUID().replaceAll('-', '');
}

/**
 * Invitation ids are the only credential of the public invitation routes: random UUIDv4s (version
 * nibble 4, RFC 9562 variant), not time-ordered UUIDv7s whose leading 48 bits are the creation time.
 */
function expectUnguessableInvitationIds(ids: string[]): void {
  const hexes = ids.map(invitationUuidHex);
  for (const hex of hexes) {
    expect(hex[12], hex).toBe('4');
    expect('89ab', hex).toContain(hex[16]);
  }
  for (let i = 1; i < hexes.length; i++) {
    // Made a moment apart, a UUIDv7 pair shares its leading timestamp digits; random ones do not.
    expect(hexes[i]!.slice(0, 12)).not.toBe(hexes[i - 1]!.slice(0, 12));
    expect(hexes[i]!.slice(13)).not.toBe(hexes[i - 1]!.slice(13));
  }
}

/**
 * Issue #3 "Done means": invite, accept as a new user, role applied, member listed, role changed,
 * removed, and the removed user's session then refused on the team. The invitation email goes
 * through the queue (`invitation.send`, workers running) and the team's SMTP adapter to a real
 * SMTP server.
 */
async function invitationFlowEndToEnd(ctx: TestContext, smtp: TestSmtpServer): Promise<void> {
  const app = ctx.app;
  await ctx.startWorkers();
  const owner = await setupOwner(app, { name: 'Olivia Owner', teamName: 'Mail Ops' });
  const teamName = (await asUser(app, owner, 'GET', '/api/auth/me')).json().data.team.name as string;
  await buildSmtpAdapter(app, owner, smtp.port);
  const apiKey = await buildApiKey(app, owner);
  const email = inviteeEmail('new.person');
  const before = smtp.messages.length;

  // Invite.
  const invited = await invite(app, owner, { email, role: 'admin' });
  expect(invited.statusCode, invited.body).toBe(201);
  const invitation = invited.json().data;
  // No link in the answer: it goes to the mailbox only (issue #8).
  expect(invitation).toEqual({
    id: expect.stringMatching(/^inv_/),
    email: email.toLowerCase(),
    role: 'admin',
    expiresAt: expect.any(String),
    createdAt: expect.any(String),
    inviter: { id: owner.userId, name: 'Olivia Owner' },
    delivery: { status: 'queued' },
  });
  const ttl = Date.parse(invitation.expiresAt) - Date.now();
  expect(ttl).toBeGreaterThan(7 * DAY_MS - 60_000);
  expect(ttl).toBeLessThanOrEqual(7 * DAY_MS);

  // The worker delivered the email with the link.
  const message = await waitFor(
    async () => smtp.messages.slice(before).find((m) => m.envelopeTo.includes(email.toLowerCase())),
    20_000,
    'the invitation email',
  );
  expect(message!.envelopeTo).toEqual([email.toLowerCase()]);
  expect(message!.parsed.subject).toBe(`Olivia Owner invited you to ${teamName} on Postwright`);
  const token = tokenOf(message!.parsed.text);
  const url = `${ctx.config.BASE_URL}/invite/${token}`;
  expect(token).not.toContain(invitation.id);
  expect(message!.parsed.text).toContain(url);
  expect(message!.parsed.html).toContain(`href="${url}"`);
  expect(message!.parsed.from?.text).toContain('sender@postwright.test');

  // What the invitation is for, without signing in; the id is no credential.
  expectError(
    await app.inject({ method: 'GET', url: `/api/auth/invitations/${invitation.id}` }),
    404,
    'NOT_FOUND',
  );
  const shown = await app.inject({ method: 'GET', url: `/api/auth/invitations/${token}` });
  expect(shown.statusCode, shown.body).toBe(200);
  expect(shown.json().data).toEqual({
    id: invitation.id,
    email: email.toLowerCase(),
    role: 'admin',
    team: { id: owner.teamId, name: teamName },
    inviterName: 'Olivia Owner',
    expiresAt: invitation.expiresAt,
    status: 'pending',
  });

  // Accept as a new user: account, membership, session.
  const password = 'a long new password';
  const accepted = await acceptInvitation(app, token, { body: { name: 'Nia Newcomer', password } });
  expect(accepted.statusCode, accepted.body).toBe(201);
  expect(accepted.json().data).toEqual({
    user: { id: expect.stringMatching(/^usr_/), name: 'Nia Newcomer', email: email.toLowerCase() },
    team: { id: owner.teamId, name: teamName, slug: expect.any(String) },
    role: 'admin',
  });
  const newcomer = { cookie: cookieHeaderFrom(accepted), userId: accepted.json().data.user.id as string };
  expect(newcomer.cookie).toContain('postwright.session_token=');

  // Role applied: the new session works on the team with the admin's permissions.
  const me = await asUser(app, newcomer, 'GET', '/api/auth/me');
  expect(me.json().data).toMatchObject({ team: { id: owner.teamId }, role: 'admin' });
  expect(me.json().data.permissions).toContain('team:manage');
  expect((await asUser(app, newcomer, 'GET', `/api/api-keys/${apiKey.id}`)).statusCode).toBe(200);
  // The password is a real credential.
  expect(await signIn(app, email, password)).toContain('postwright.session_token=');

  // Member listed.
  const listed = (await listMembers(app, owner)).find((m) => m.userId === newcomer.userId);
  expect(listed).toMatchObject({ name: 'Nia Newcomer', email: email.toLowerCase(), role: 'admin' });
  const reshown = await app.inject({ method: 'GET', url: `/api/auth/invitations/${token}` });
  expect(reshown.json().data).toMatchObject({ status: 'accepted' });
  const pending = await asUser(app, owner, 'GET', '/api/team/invitations');
  expect(pending.json().data.map((i: { id: string }) => i.id)).not.toContain(invitation.id);
  const again = await acceptInvitation(app, token, { body: { name: 'Nia Newcomer', password } });
  expect(expectError(again, 409, 'CONFLICT').details.reason).toBe('ALREADY_ACCEPTED');

  // Role changed: takes effect on the newcomer's next request.
  const changed = await asUser(app, owner, 'PUT', `/api/team/members/${newcomer.userId}`, { role: 'viewer' });
  expect(changed.statusCode, changed.body).toBe(200);
  expect(changed.json().data).toMatchObject({ userId: newcomer.userId, role: 'viewer' });
  expect((await asUser(app, newcomer, 'GET', '/api/auth/me')).json().data.role).toBe('viewer');
  expectError(await asUser(app, newcomer, 'GET', `/api/api-keys/${apiKey.id}`), 403, 'FORBIDDEN');
  expectError(await invite(app, newcomer, { email: inviteeEmail(), role: 'viewer' }), 403, 'FORBIDDEN');

  // Removed: the same session is refused on the team at once.
  const removed = await asUser(app, owner, 'DELETE', `/api/team/members/${newcomer.userId}`);
  expect(removed.statusCode, removed.body).toBe(200);
  expect((await listMembers(app, owner)).map((m) => m.userId)).not.toContain(newcomer.userId);
  for (const url of [
    '/api/team/members',
    '/api/auth/me',
    '/api/api-keys',
    `/api/api-keys/${apiKey.id}`,
    '/api/logs',
  ]) {
    const response = await asUser(app, newcomer, 'GET', url);
    expect([403, 404], `${url}: ${response.body}`).toContain(response.statusCode);
    expect(response.json().success).toBe(false);
  }
}

describe('team invitations (PostgreSQL)', () => {
  let ctx: TestContext;
  let smtp: TestSmtpServer;

  beforeAll(async () => {
    [ctx, smtp] = await Promise.all([createTestContext('postgres'), startTestSmtpServer()]);
  });
  afterAll(async () => {
    await ctx?.close();
    await smtp?.close();
  });

  const app = () => ctx.app;

  it('runs the invitation flow end to end: invite, email, accept as a new user, role, removal', async () => {
    await invitationFlowEndToEnd(ctx, smtp);
  });

  it('renews a pending invitation instead of duplicating it, and refuses inviting a member', async () => {
    const owner = await setupOwner(app());
    const email = inviteeEmail();
    const first = await buildInvitation(app(), owner, { email, role: 'viewer' });

    const renewed = await invite(app(), owner, { email: email.toUpperCase(), role: 'member' });
    expect(renewed.statusCode, renewed.body).toBe(200);
    expect(renewed.json().data).toMatchObject({ id: first.id, email: email.toLowerCase(), role: 'member' });
    // No adapter: each renewal shows a fresh link, and the earlier one stops working.
    expect(tokenOf(renewed.json().data.url)).not.toBe(tokenOf(first.url));
    const stale = await app().inject({ method: 'GET', url: `/api/auth/invitations/${tokenOf(first.url)}` });
    expectError(stale, 404, 'NOT_FOUND');
    expect(Date.parse(renewed.json().data.expiresAt)).toBeGreaterThanOrEqual(Date.parse(first.expiresAt));

    const list = await asUser(app(), owner, 'GET', '/api/team/invitations');
    expect(list.statusCode).toBe(200);
    const listed = list.json().data.filter((i: { email: string }) => i.email === email.toLowerCase());
    expect(listed).toEqual([
      {
        id: first.id,
        email: email.toLowerCase(),
        role: 'member',
        expiresAt: renewed.json().data.expiresAt,
        createdAt: expect.any(String),
        inviter: { id: owner.userId, name: 'Test Owner' },
      },
    ]);

    const member = await addTeamMember(app(), owner, 'member');
    const existing = await invite(app(), owner, { email: member.email.toUpperCase(), role: 'admin' });
    expectError(existing, 409, 'ALREADY_EXISTS');
    expectError(await invite(app(), owner, { email: owner.email, role: 'viewer' }), 409, 'ALREADY_EXISTS');

    const invalid = await invite(app(), owner, { email: 'not-an-email', role: 'owner' });
    expectError(invalid, 400, 'VALIDATION_ERROR');
  });

  it('lets only owners invite owners', async () => {
    const owner = await setupOwner(app());
    const admin = await addTeamMember(app(), owner, 'admin');
    const byAdmin = await invite(app(), admin, { email: inviteeEmail(), role: 'owner' });
    expect(expectError(byAdmin, 403, 'FORBIDDEN').details.reason).toBe('OWNER_REQUIRED');

    const email = inviteeEmail();
    const ownerInvite = await buildInvitation(app(), owner, { email, role: 'owner' });
    expect(ownerInvite.role).toBe('owner');
    // An admin cannot turn an owner's invitation into something else either.
    expectError(await invite(app(), admin, { email, role: 'viewer' }), 403, 'FORBIDDEN');
    const adminInvite = await buildInvitation(app(), admin, { role: 'admin' });
    expect(adminInvite.role).toBe('admin');
  });

  it('cancels invitations: the link stops working, and only the team can cancel its own', async () => {
    const owner = await setupOwner(app());
    const invitation = await buildInvitation(app(), owner);
    const outsider = await setupOwner(app());
    expectError(
      await asUser(app(), outsider, 'DELETE', `/api/team/invitations/${invitation.id}`),
      404,
      'NOT_FOUND',
    );

    const canceled = await asUser(app(), owner, 'DELETE', `/api/team/invitations/${invitation.id}`);
    expect(canceled.statusCode, canceled.body).toBe(200);
    expect(canceled.json()).toEqual({ success: true });
    expectError(
      await asUser(app(), owner, 'DELETE', `/api/team/invitations/${invitation.id}`),
      404,
      'NOT_FOUND',
    );
    expectError(
      await app().inject({ method: 'GET', url: `/api/auth/invitations/${tokenOf(invitation.url)}` }),
      404,
      'NOT_FOUND',
    );
    const accept = await acceptInvitation(app(), tokenOf(invitation.url), {
      body: { name: 'Late', password: 'password123' },
    });
    expectError(accept, 404, 'NOT_FOUND');
    expect((await asUser(app(), owner, 'GET', '/api/team/invitations')).json().data).toEqual([]);
    expectError(
      await app().inject({ method: 'GET', url: '/api/auth/invitations/inv_unknown' }),
      404,
      'NOT_FOUND',
    );
  });

  it('refuses an expired invitation with NOT_FOUND and reason EXPIRED', async () => {
    const owner = await setupOwner(app());
    const invitation = await buildInvitation(app(), owner);
    await app()
      .ctx.database.db.update(invitations)
      .set({ expiresAt: new Date(Date.now() - 1000) })
      .where(eq(invitations.id, invitation.id));

    const token = tokenOf(invitation.url);
    const shown = await app().inject({ method: 'GET', url: `/api/auth/invitations/${token}` });
    expect(expectError(shown, 404, 'NOT_FOUND').details.reason).toBe('EXPIRED');
    const accept = await acceptInvitation(app(), token, {
      body: { name: 'Late', password: 'password123' },
    });
    expect(expectError(accept, 404, 'NOT_FOUND').details.reason).toBe('EXPIRED');
    expect((await asUser(app(), owner, 'GET', '/api/team/invitations')).json().data).toEqual([]);
    // Inviting the email again renews the same invitation, with a new link.
    const renewed = await invite(app(), owner, { email: invitation.email, role: 'viewer' });
    expect(renewed.json().data).toMatchObject({ id: invitation.id, role: 'viewer' });
    const newToken = tokenOf(renewed.json().data.url);
    expect((await app().inject({ method: 'GET', url: `/api/auth/invitations/${newToken}` })).statusCode).toBe(
      200,
    );
  });

  it('lets an existing user accept while signed in, and switches their session to the team', async () => {
    const owner = await setupOwner(app());
    const existing = await setupOwner(app());
    const invitation = await buildInvitation(app(), owner, {
      email: existing.email.toUpperCase(),
      role: 'member',
    });

    const token = tokenOf(invitation.url);
    const shown = await app().inject({ method: 'GET', url: `/api/auth/invitations/${token}` });
    expect(shown.json().data).toMatchObject({ status: 'pending' });
    expect(shown.json().data).not.toHaveProperty('accountExists');
    // Not signed in: the account exists, so no new one is made from a name and password.
    const anonymous = await acceptInvitation(app(), token, {
      body: { name: 'X', password: 'password123' },
    });
    expect(expectError(anonymous, 401, 'UNAUTHORIZED').details.reason).toBe('SIGN_IN_REQUIRED');
    // Without a name and password the answer is the one any email gets (issue #8: no account oracle).
    expectError(await acceptInvitation(app(), token), 400, 'VALIDATION_ERROR');
    // Signed in as somebody else.
    const wrongUser = await addTeamMember(app(), owner, 'viewer');
    const wrong = await acceptInvitation(app(), token, { user: wrongUser });
    expect(expectError(wrong, 403, 'FORBIDDEN').details.reason).toBe('WRONG_ACCOUNT');
    // Without our Origin.
    const crossSite = await app().inject({
      method: 'POST',
      url: `/api/auth/invitations/${token}/accept`,
      headers: { cookie: existing.cookie, origin: 'https://evil.example' },
    });
    expectError(crossSite, 403, 'FORBIDDEN');

    // Signed in as the invited email, but with the invitation's id: no.
    expectError(await acceptInvitation(app(), invitation.id, { user: existing }), 404, 'NOT_FOUND');
    const accepted = await acceptInvitation(app(), token, { user: existing });
    expect(accepted.statusCode, accepted.body).toBe(201);
    expect(accepted.json().data).toMatchObject({
      user: { id: existing.userId, email: existing.email },
      team: { id: owner.teamId },
      role: 'member',
    });
    const me = await asUser(app(), existing, 'GET', '/api/auth/me');
    expect(me.json().data).toMatchObject({ team: { id: owner.teamId }, role: 'member' });
    const teams = await asUser(app(), existing, 'GET', '/api/teams');
    expect(teams.json().data.map((t: { id: string; role: string }) => [t.id, t.role])).toEqual([
      [existing.teamId, 'owner'],
      [owner.teamId, 'member'],
    ]);
    expectError(await acceptInvitation(app(), token, { user: existing }), 409, 'CONFLICT');
  });

  it('needs a name and a password to create the account', async () => {
    const owner = await setupOwner(app());
    const invitation = await buildInvitation(app(), owner);
    const token = tokenOf(invitation.url);
    const missing = await acceptInvitation(app(), token);
    const details = expectError(missing, 400, 'VALIDATION_ERROR').details;
    expect(details.issues.map((i: { path: string }) => i.path)).toEqual(['body.name', 'body.password']);
    const short = await acceptInvitation(app(), token, { body: { name: 'Sam', password: 'short' } });
    expectError(short, 400, 'VALIDATION_ERROR');
    const noOrigin = await app().inject({
      method: 'POST',
      url: `/api/auth/invitations/${token}/accept`,
      payload: { name: 'Sam', password: 'password123' },
    });
    expectError(noOrigin, 403, 'FORBIDDEN');
    // Still open after all of that.
    const shown = await app().inject({ method: 'GET', url: `/api/auth/invitations/${token}` });
    expect(shown.json().data.status).toBe('pending');
  });

  it('gives invitations unguessable ids: random UUIDv4 inside, not time-ordered', async () => {
    const owner = await setupOwner(app());
    const first = await buildInvitation(app(), owner);
    const second = await buildInvitation(app(), owner);
    expect(second.id).not.toBe(first.id);
    expectUnguessableInvitationIds([first.id, second.id]);
    // The link carries a token of its own, not the id.
    expect(second.url).toMatch(new RegExp(`^${ctx.config.BASE_URL}/invite/[\\w-]{43}$`));
    expect(second.url).not.toContain(second.id);

    // Invitations better-auth would create itself get the same kind of id.
    const authContext = await app().ctx.auth.$context;
    const generated = [1, 2].map(() => authContext.generateId({ model: 'invitation' }) as string);
    expectUnguessableInvitationIds(generated);
    expect(authContext.generateId({ model: 'member' })).toMatch(/^mem_/);
  });
});

describe('team invitations (PostgreSQL)', () => {
  let ctx: TestContext;
  let smtp: TestSmtpServer;

  beforeAll(async () => {
    [ctx, smtp] = await Promise.all([createTestContext('postgres'), startTestSmtpServer()]);
  });
  afterAll(async () => {
    await ctx?.close();
    await smtp?.close();
  });

  it('runs the invitation flow end to end: invite, email, accept as a new user, role, removal', async () => {
    await invitationFlowEndToEnd(ctx, smtp);
  });

  it('keeps an owner when two owners step down or demote each other at the same time', async () => {
    const first = await setupOwner(ctx.app);
    const second = await addTeamMember(ctx.app, first, 'owner');
    const put = (user: { cookie: string }, userId: string) =>
      asUser(ctx.app, user, 'PUT', `/api/team/members/${userId}`, { role: 'admin' });

    const selves = await Promise.all([put(first, first.userId), put(second, second.userId)]);
    expect(selves.map((r) => r.statusCode).sort()).toEqual([200, 409]);
    const ownersAfterSelves = (await listMembers(ctx.app, first)).filter((m) => m.role === 'owner');
    expect(ownersAfterSelves).toHaveLength(1);

    const demoted = selves[0]!.statusCode === 200 ? first : second;
    const other = demoted === first ? second : first;
    expect(
      (await asUser(ctx.app, other, 'PUT', `/api/team/members/${demoted.userId}`, { role: 'owner' }))
        .statusCode,
    ).toBe(200);
    const crossed = await Promise.all([put(first, second.userId), put(second, first.userId)]);
    expect(crossed.map((r) => r.statusCode).sort()).toEqual([200, 403]);
    expect((await listMembers(ctx.app, first)).filter((m) => m.role === 'owner')).toHaveLength(1);
  });
});

/** An SMTP "server" that accepts TCP connections and never says a word (no 220 greeting). */
async function startSilentServer(): Promise<{
  port: number;
  connections: () => number;
  close(): Promise<void>;
}> {
  const sockets = new Set<Socket>();
  let accepted = 0;
  const server = createServer((socket) => {
    accepted++;
    sockets.add(socket);
    socket.on('error', () => {});
    socket.on('close', () => sockets.delete(socket));
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const address = server.address();
  return {
    port: typeof address === 'object' && address ? address.port : 0,
    connections: () => accepted,
    close: () => {
      for (const socket of sockets) socket.destroy();
      return new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

describe('team invitations: the email goes through the invitation.send job (PostgreSQL)', () => {
  let ctx: TestContext;
  let smtp: TestSmtpServer;
  let silent: Awaited<ReturnType<typeof startSilentServer>>;
  const attempts = new Map<string, number>();
  let workers: Promise<void> | undefined;
  /** Starts the workers once (the first test looks at jobs before any worker takes them). */
  const withWorkers = () => {
    workers ??= ctx.startWorkers();
    return workers;
  };

  beforeAll(async () => {
    [ctx, smtp, silent] = await Promise.all([
      createTestContext('postgres', { SEND_RETRY_LIMIT: '1', SEND_RETRY_DELAY_SECONDS: '1' }),
      startTestSmtpServer({
        onRcptTo(address, _session, callback) {
          const n = (attempts.get(address.address) ?? 0) + 1;
          attempts.set(address.address, n);
          if (address.address.startsWith('refused-')) {
            return callback(Object.assign(new Error('No such user'), { responseCode: 550 }));
          }
          if (address.address.startsWith('busy-once-') && n === 1) {
            return callback(Object.assign(new Error('Mailbox busy, try later'), { responseCode: 451 }));
          }
          callback();
        },
      }),
      startSilentServer(),
    ]);
  });
  afterAll(async () => {
    // The silent server first: a worker stuck on it gets its connection closed while the queue runs.
    await silent?.close();
    await ctx?.close();
    await smtp?.close();
  });

  const app = () => ctx.app;
  const jobsFor = (invitationId: string) =>
    ctx.queue.boss.findJobs<JobPayload<'invitation.send'>>(INVITATION_SEND_JOB, { data: { invitationId } });
  const settledJob = (invitationId: string) =>
    waitFor(
      async () => {
        const [job] = await jobsFor(invitationId);
        return job && ['completed', 'failed'].includes(job.state) ? job : undefined;
      },
      20_000,
      `the invitation.send job of ${invitationId}`,
    );
  const messagesTo = (email: string) =>
    smtp.messages.filter((m) => m.envelopeTo.includes(email.toLowerCase()));

  it('declares invitation.send with the send retry policy', async () => {
    const queue = await ctx.queue.boss.getQueue(INVITATION_SEND_JOB);
    expect(queue).toMatchObject({ retryLimit: 1, retryDelay: 1, retryBackoff: true });
  });

  it('enqueues the job with the invitation, a fresh one per renewal, and none when it cannot be sent', async () => {
    // Nothing to send with: skipped, no job.
    const noAdapter = await setupOwner(app());
    const skipped = await buildInvitation(app(), noAdapter);
    expect(skipped).toMatchObject({ delivery: { status: 'skipped', reason: 'NO_ACTIVE_ADAPTER' } });
    expect(await jobsFor(skipped.id)).toEqual([]);
    const noSender = await setupOwner(app());
    await buildSmtpAdapter(app(), noSender, smtp.port, { defaultFrom: undefined });
    const unsent = await buildInvitation(app(), noSender);
    expect(unsent).toMatchObject({ delivery: { status: 'skipped', reason: 'NO_SENDER' } });
    expect(await jobsFor(unsent.id)).toEqual([]);

    // With a sender: the job is committed with the invitation (no worker has run yet).
    const owner = await setupOwner(app());
    await buildSmtpAdapter(app(), owner, smtp.port);
    const email = inviteeEmail();
    const invitation = await buildInvitation(app(), owner, { email, role: 'viewer' });
    expect(invitation).toMatchObject({ delivery: { status: 'queued' } });
    const [job, ...others] = await jobsFor(invitation.id);
    expect(others).toEqual([]);
    expect(job).toMatchObject({
      state: 'created',
      data: { invitationId: invitation.id, teamId: owner.teamId },
      retryLimit: 1,
    });

    const renewed = await invite(app(), owner, { email, role: 'admin' });
    expect(renewed.statusCode, renewed.body).toBe(200);
    expect(renewed.json().data).toMatchObject({ id: invitation.id, delivery: { status: 'queued' } });
    const jobs = await jobsFor(invitation.id);
    expect(jobs).toHaveLength(2);
    expect(new Set(jobs.map((j) => j.id)).size).toBe(2);

    // A refused invitation (already a member) enqueues nothing.
    const member = await addTeamMember(app(), owner, 'member');
    const before = (await ctx.queue.boss.findJobs(INVITATION_SEND_JOB)).length;
    expectError(await invite(app(), owner, { email: member.email, role: 'admin' }), 409, 'ALREADY_EXISTS');
    expect(await ctx.queue.boss.findJobs(INVITATION_SEND_JOB)).toHaveLength(before);

    // The workers send both: the renewal carries the new role.
    await withWorkers();
    await Promise.all(jobs.map((j) => settledJob(j.data.invitationId)));
    const delivered = await waitFor(async () => {
      const found = messagesTo(email);
      return found.length >= 2 ? found : undefined;
    });
    expect(delivered).toHaveLength(2);
    // Each email made its own token; only the one stored last still opens the invitation.
    const tokens = delivered.map((m) => tokenOf(m.parsed.text));
    expect(new Set(tokens).size).toBe(2);
    const opening = await Promise.all(
      tokens.map(
        async (t) => (await app().inject({ method: 'GET', url: `/api/auth/invitations/${t}` })).statusCode,
      ),
    );
    expect(opening.sort()).toEqual([200, 404]);
    expect(delivered.some((m) => m.parsed.text?.includes('as admin'))).toBe(true);
  });

  it('answers 201 queued when the provider refuses for good (550); the job completes without retrying', async () => {
    await withWorkers();
    const owner = await setupOwner(app());
    await buildSmtpAdapter(app(), owner, smtp.port);
    const email = inviteeEmail('refused');
    const response = await invite(app(), owner, { email, role: 'member' });
    expect(response.statusCode, response.body).toBe(201);
    const invitation = response.json().data;
    expect(invitation.delivery).toEqual({ status: 'queued' });

    const job = await settledJob(invitation.id);
    expect(job.state).toBe('completed');
    expect(job.retryCount).toBe(0);
    expect(attempts.get(email.toLowerCase())).toBe(1);
    expect(messagesTo(email)).toEqual([]);
    // The invitation stands (renewing it sends a new link).
    const listed = (await asUser(app(), owner, 'GET', '/api/team/invitations')).json().data;
    expect(listed.map((i: { id: string }) => i.id)).toEqual([invitation.id]);
  });

  it('retries a transient refusal (451) through the queue and then delivers', async () => {
    await withWorkers();
    const owner = await setupOwner(app());
    await buildSmtpAdapter(app(), owner, smtp.port);
    const email = inviteeEmail('busy-once');
    const invitation = await buildInvitation(app(), owner, { email });
    expect(invitation).toMatchObject({ delivery: { status: 'queued' } });

    const job = await settledJob(invitation.id);
    expect(job.state).toBe('completed');
    expect(job.retryCount).toBe(1);
    expect(attempts.get(email.toLowerCase())).toBe(2);
    expect(messagesTo(email)).toHaveLength(1);
  });

  it('sends nothing for an invitation no longer pending, expired, or whose team lost its adapter', async () => {
    const owner = await setupOwner(app());
    const adapter = await buildSmtpAdapter(app(), owner, smtp.port);
    const db = app().ctx.database.db;
    const handler = createSendInvitationHandler(ctx.context);
    const email = inviteeEmail('direct');
    // Inserted directly: no job, the handler is called by hand.
    const { id } = await teamRepository.insertInvitation(db, {
      id: newUnguessableId('invitation'),
      organizationId: owner.teamId,
      email: email.toLowerCase(),
      role: 'viewer',
      status: 'pending',
      expiresAt: new Date(Date.now() + DAY_MS),
      inviterId: owner.userId,
    });
    const run = (data: { invitationId: string; teamId: string }) =>
      handler({ id: 'job', data, retryCount: 0, retryLimit: 1 });

    await run({ invitationId: id, teamId: owner.teamId });
    expect(messagesTo(email)).toHaveLength(1);
    const token = tokenOf(messagesTo(email)[0]!.parsed.text);
    expect(messagesTo(email)[0]!.parsed.text).toContain(`${ctx.config.BASE_URL}/invite/${token}`);
    // Only the token's SHA-256 is stored, marked as gone to the mailbox.
    const [stored] = await db.select().from(invitations).where(eq(invitations.id, id));
    expect(stored).toMatchObject({ tokenHash: hashInvitationToken(token), tokenEmailed: true });
    expect(JSON.stringify(stored)).not.toContain(token);

    // Another team's id, an unknown invitation: nothing.
    await run({ invitationId: id, teamId: 'team_other' });
    await run({ invitationId: 'inv_unknown', teamId: owner.teamId });
    // Expired.
    await db
      .update(invitations)
      .set({ expiresAt: new Date(Date.now() - 1000) })
      .where(eq(invitations.id, id));
    await run({ invitationId: id, teamId: owner.teamId });
    // Pending again, but the team's only adapter is disabled.
    await db
      .update(invitations)
      .set({ expiresAt: new Date(Date.now() + DAY_MS) })
      .where(eq(invitations.id, id));
    const disabled = await asUser(app(), owner, 'PUT', `/api/adapters/${adapter.id}`, { isActive: false });
    expect(disabled.statusCode, disabled.body).toBe(200);
    await run({ invitationId: id, teamId: owner.teamId });
    // Canceled (adapter active again).
    await asUser(app(), owner, 'PUT', `/api/adapters/${adapter.id}`, { isActive: true });
    expect((await asUser(app(), owner, 'DELETE', `/api/team/invitations/${id}`)).statusCode).toBe(200);
    await run({ invitationId: id, teamId: owner.teamId });

    expect(messagesTo(email)).toHaveLength(1);
  });

  it('answers at once while the SMTP server accepts the connection and never answers', async () => {
    await withWorkers();
    const owner = await setupOwner(app());
    await buildSmtpAdapter(app(), owner, silent.port);
    const started = Date.now();
    const response = await invite(app(), owner, { email: inviteeEmail('silent'), role: 'member' });
    const elapsed = Date.now() - started;
    expect(response.statusCode, response.body).toBe(201);
    expect(response.json().data.delivery).toEqual({ status: 'queued' });
    // Proven below by state (the job is still active on the silent server after the answer); the
    // time is a wide-margin guard: a request waiting on that server would wait its greeting timeout.
    expect(elapsed).toBeLessThan(SMTP_TIMEOUTS_MS.greeting);
    const { id } = response.json().data;
    // A worker did take the job and is stuck on the silent server, not the request.
    await waitFor(async () => (silent.connections() > 0 ? true : undefined), 10_000, 'an SMTP connection');
    const [job] = await jobsFor(id);
    expect(job?.state).toBe('active');
    const listed = (await asUser(app(), owner, 'GET', '/api/team/invitations')).json().data;
    expect(listed.map((i: { id: string }) => i.id)).toEqual([id]);
  });
});

/*
 * AUTH_PASSWORD=false: an invitation cannot create a password account (nor sign in with one);
 * the invitee signs in through the provider and accepts signed in. The app listens on a real port
 * with OpenID Connect against oauth2-mock-server on 127.0.0.1. Nobody can sign in with a password
 * here, so the owner, team and invitation are inserted directly.
 */
describe('team invitations with password sign-in off (PostgreSQL)', () => {
  let ctx: TestContext;
  let oidc: OidcProvider;
  let url: string;

  beforeAll(async () => {
    oidc = await startOidcProvider();
    url = `http://127.0.0.1:${await freePort()}`;
    ctx = await createTestContext('postgres', {
      BASE_URL: url,
      TRUST_PROXY: '1',
      AUTH_PASSWORD: 'false',
      ...oidc.env,
    });
    await ctx.app.listen({ port: Number(new URL(url).port), host: '127.0.0.1' });
  });
  afterAll(async () => {
    await ctx?.close();
    await oidc?.close();
  });

  /**
   * An owner and their team, inserted directly, and a pending invitation for `email` into it, with
   * the token its email would carry.
   */
  async function invitationFor(email: string): Promise<{ id: string; teamId: string; token: string }> {
    const db = ctx.app.ctx.database.db;
    const passwordHash = await (await ctx.app.ctx.auth.$context).password.hash('an unused password');
    const { token, tokenHash } = newInvitationToken();
    return db.transaction(async (tx) => {
      const owner = await insertUserWithPassword(tx, {
        name: 'Olivia Owner',
        email: `owner-${randomBytes(5).toString('hex')}@example.test`,
        passwordHash,
      });
      const team = await insertTeam(tx, { name: 'SSO Team', slug: `sso-${randomBytes(4).toString('hex')}` });
      await insertMember(tx, { teamId: team.id, userId: owner.id, role: 'owner' });
      const invitation = await teamRepository.insertInvitation(tx, {
        id: newUnguessableId('invitation'),
        organizationId: team.id,
        email,
        role: 'admin',
        status: 'pending',
        expiresAt: new Date(Date.now() + DAY_MS),
        inviterId: owner.id,
        tokenHash,
        tokenEmailed: true,
      });
      return { id: invitation.id, teamId: team.id, token };
    });
  }

  it('refuses creating a password account; signing in through the provider puts the invitee in the team', async () => {
    const app = ctx.app;
    const db = app.ctx.database.db;
    const invitee = newIdentity({ emailVerified: true });
    const invitation = await invitationFor(invitee.email);

    const refused = await acceptInvitation(app, invitation.token, {
      body: { name: 'Nia Newcomer', password: 'a long new password' },
    });
    const error = expectError(refused, 403, 'FORBIDDEN');
    expect(error.details.reason).toBe('PASSWORD_SIGN_IN_DISABLED');
    expect(error.message).toMatch(/sign in with a provider/i);
    expect(refused.cookies.map((c) => c.name).join(' ')).not.toContain('session_token');
    expect(await db.select().from(users).where(eq(users.email, invitee.email))).toEqual([]);
    // Without a body too: password sign-in is off, so there is nothing to ask for.
    const bare = await acceptInvitation(app, invitation.token);
    expect(expectError(bare, 403, 'FORBIDDEN').details.reason).toBe('PASSWORD_SIGN_IN_DISABLED');
    const shown = await app.inject({ method: 'GET', url: `/api/auth/invitations/${invitation.token}` });
    expect(shown.json().data).toMatchObject({ status: 'pending' });

    // Signed in through the provider (the pending invitation lets it create the account): the
    // invitation is accepted on the way, so the first session is in the team with the invited role.
    oidc.nextIdentity(invitee);
    const flow = await signInWithProvider(url, 'oidc', { redirectTo: `/invite/${invitation.token}` });
    expect(flow.location).toBe(`${url}/invite/${invitation.token}`);
    expect(flow.cookie).toContain('session_token=');
    const me = await app.inject({
      method: 'GET',
      url: '/api/auth/me',
      headers: sessionHeaders(app, { cookie: flow.cookie }),
    });
    expect(me.statusCode, me.body).toBe(200);
    expect(me.json().data).toMatchObject({
      user: { email: invitee.email, name: invitee.name },
      team: { id: invitation.teamId, name: 'SSO Team' },
      role: 'admin',
    });
    const userId = me.json().data.user.id as string;
    const [membership] = await db.select().from(members).where(eq(members.userId, userId));
    expect(membership).toMatchObject({ organizationId: invitation.teamId, role: 'admin' });
    // The dashboard's accept, following the redirect, finds it done.
    const again = await acceptInvitation(app, invitation.token, { user: { cookie: flow.cookie } });
    expect(expectError(again, 409, 'CONFLICT').details.reason).toBe('ALREADY_ACCEPTED');
  });
});
