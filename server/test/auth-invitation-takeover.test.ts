import { eq } from 'drizzle-orm';
import type { FastifyInstance } from 'fastify';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { accounts, users } from '../src/db/schema/index.ts';
import { createTestContext, type TestContext, waitFor } from './helpers/app.ts';
import {
  addTeamMember,
  cookieHeaderFrom,
  freePort,
  newIdentity,
  type OidcProvider,
  type SignedInUser,
  setupOwner,
  signIn,
  signInWithProvider,
  startOidcProvider,
  type TeamOwner,
} from './helpers/auth.ts';
import { buildSmtpAdapter, expectError } from './helpers/factories.ts';
import { startTestSmtpServer, type TestSmtpServer } from './helpers/smtp-server.ts';
import { acceptInvitation, asUser, invite, listMembers, tokenOf } from './helpers/teams.ts';

/*
 * Issue #8 "Security hardening", High: account takeover through an invitation and provider linking.
 * The app listens on a real port with email + password and OpenID Connect (oauth2-mock-server);
 * invitation emails go through the workers to a real SMTP server, where the tests read the links.
 */
let ctx: TestContext;
let smtp: TestSmtpServer;
let oidc: OidcProvider;
let url: string;
const app = (): FastifyInstance => ctx.app;

beforeAll(async () => {
  [oidc, smtp] = await Promise.all([startOidcProvider(), startTestSmtpServer()]);
  url = `http://127.0.0.1:${await freePort()}`;
  ctx = await createTestContext('postgres', {
    BASE_URL: url,
    TRUST_PROXY: '1',
    ...oidc.env,
  });
  await ctx.app.listen({ port: Number(new URL(url).port), host: '127.0.0.1' });
  await ctx.startWorkers();
});

afterAll(async () => {
  await ctx?.close();
  await smtp?.close();
  await oidc?.close();
});

/**
 * Any signed-in user: a viewer somewhere, who creates a team of their own (becoming its owner) and
 * works in it; with `adapter`, the team can email invitations.
 */
async function attackerWithOwnTeam(options: {
  adapter: boolean;
}): Promise<SignedInUser & { teamId: string }> {
  const victimOrg = await setupOwner(app());
  const attacker = await addTeamMember(app(), victimOrg, 'viewer');
  const team = await asUser(app(), attacker, 'POST', '/api/teams', { name: 'Totally Legit' });
  expect(team.statusCode, team.body).toBe(201);
  const teamId = team.json().data.id as string;
  const switched = await asUser(app(), attacker, 'POST', '/api/auth/switch-team', { teamId });
  expect(switched.statusCode, switched.body).toBe(200);
  const owner = { ...attacker, teamId };
  if (options.adapter) await buildSmtpAdapter(app(), owner, smtp.port);
  return owner;
}

/** A team owner whose team emails its invitations. */
async function ownerWithAdapter(): Promise<TeamOwner> {
  const owner = await setupOwner(app());
  await buildSmtpAdapter(app(), owner, smtp.port);
  return owner;
}

/** The token of the newest invitation email to `email` after `before` messages. */
async function emailedToken(email: string, before: number): Promise<string> {
  const message = await waitFor(
    async () => smtp.messages.slice(before).find((m) => m.envelopeTo.includes(email.toLowerCase())),
    20_000,
    `the invitation email to ${email}`,
  );
  return tokenOf(message.parsed.text);
}

const userByEmail = async (email: string) =>
  (await app().ctx.database.db.select().from(users).where(eq(users.email, email.toLowerCase())))[0];
const providersOf = async (userId: string) =>
  (
    await app()
      .ctx.database.db.select({ providerId: accounts.providerId })
      .from(accounts)
      .where(eq(accounts.userId, userId))
  )
    .map((a) => a.providerId)
    .sort();
const me = (cookie: string) => app().inject({ method: 'GET', url: '/api/auth/me', headers: { cookie } });

describe('invitation links and provider linking (issue #8) on PostgreSQL', () => {
  it('keeps better-auth from linking providers to accounts whose email is unverified', async () => {
    expect((await app().ctx.auth.$context).options.account?.accountLinking).toMatchObject({
      requireLocalEmailVerified: true,
      trustedProviders: [],
      allowDifferentEmails: false,
    });
  });

  it('accepts nothing by invitation id; the token goes only to the mailbox; the victim later signs in with OIDC into an account of their own', async () => {
    const attacker = await attackerWithOwnTeam({ adapter: true });
    const victim = newIdentity({ emailVerified: true });
    const before = smtp.messages.length;

    const created = await invite(app(), attacker, { email: victim.email, role: 'member' });
    expect(created.statusCode, created.body).toBe(201);
    expect(created.json().data.delivery).toEqual({ status: 'queued' });
    expect(created.json().data).not.toHaveProperty('url');
    const invitationId = created.json().data.id as string;
    const token = await emailedToken(victim.email, before);
    const listed = await asUser(app(), attacker, 'GET', '/api/team/invitations');
    for (const body of [created.body, listed.body]) {
      expect(body).not.toContain(token);
      expect(body).not.toContain('/invite/');
    }

    // The id the inviter holds opens nothing and creates nothing.
    expectError(
      await app().inject({ method: 'GET', url: `/api/auth/invitations/${invitationId}` }),
      404,
      'NOT_FOUND',
    );
    const takeover = await acceptInvitation(app(), invitationId, {
      body: { name: 'Victim', password: 'attacker-chosen-password' },
    });
    expectError(takeover, 404, 'NOT_FOUND');
    expect(await userByEmail(victim.email)).toBeUndefined();

    // The owner of the address signs in with OIDC: a fresh account, no password anyone else set.
    oidc.nextIdentity(victim);
    const flow = await signInWithProvider(url, 'oidc');
    expect(flow.location).toBe(`${url}/`);
    const account = await userByEmail(victim.email);
    expect(account).toMatchObject({ emailVerified: true });
    expect(await providersOf(account!.id)).toEqual(['oidc']);
    await expect(signIn(app(), victim.email, 'attacker-chosen-password')).rejects.toThrow(/401/);
    expect((await me(flow.cookie)).json().data.user.id).toBe(account!.id);
  });

  it('takes an account made through a link shown to the inviter back from them when the owner of the address signs in with OIDC', async () => {
    const attacker = await attackerWithOwnTeam({ adapter: false });
    const victim = newIdentity({ emailVerified: true });

    // No adapter: the inviter gets the link, once.
    const created = await invite(app(), attacker, { email: victim.email, role: 'member' });
    expect(created.json().data.delivery).toMatchObject({ status: 'skipped' });
    const token = tokenOf(created.json().data.url);
    const listed = await asUser(app(), attacker, 'GET', '/api/team/invitations');
    expect(listed.body).not.toContain(token);

    // The inviter accepts it as the victim: the account exists, but its email counts as unverified.
    const attackerPassword = 'attacker-chosen-password';
    const squat = await acceptInvitation(app(), token, {
      body: { name: 'Victim', password: attackerPassword },
    });
    expect(squat.statusCode, squat.body).toBe(201);
    const squatCookie = cookieHeaderFrom(squat);
    expect((await me(squatCookie)).statusCode).toBe(200);
    const squatted = await userByEmail(victim.email);
    expect(squatted).toMatchObject({ emailVerified: false });
    expect(await providersOf(squatted!.id)).toEqual(['credential']);

    // The owner of the address signs in with OIDC: the provider is not attached to the attacker's
    // password account; the password is removed and the attacker's sessions revoked first.
    oidc.nextIdentity(victim);
    const flow = await signInWithProvider(url, 'oidc');
    expect(flow.location).toBe(`${url}/`);
    expect(flow.cookie).toContain('session_token=');
    const reclaimed = await userByEmail(victim.email);
    expect(reclaimed).toMatchObject({ id: squatted!.id, emailVerified: true });
    expect(await providersOf(squatted!.id)).toEqual(['oidc']);
    expectError(await me(squatCookie), 401, 'UNAUTHORIZED');
    await expect(signIn(app(), victim.email, attackerPassword)).rejects.toThrow(/401/);
    expect((await me(flow.cookie)).json().data.user.id).toBe(squatted!.id);
  });

  it('an emailed link proves no mailbox either: a team emailing through its own adapter takes over no account', async () => {
    // Security review, session 12: the invitation email goes through the inviting team's own
    // adapter, here an SMTP server the attacker runs (the test's), so its link reaches the attacker.
    // Before, accepting with it reclaimed an unverified account (the first-run owner's, made by the
    // setup form) with the attacker's password, and marked accounts verified.
    const victim = await setupOwner(app());
    expect(await userByEmail(victim.email)).toMatchObject({ emailVerified: false });
    const attacker = await attackerWithOwnTeam({ adapter: true });

    let before = smtp.messages.length;
    const created = await invite(app(), attacker, { email: victim.email, role: 'viewer' });
    expect(created.json().data.delivery).toEqual({ status: 'queued' });
    const token = await emailedToken(victim.email, before);
    const takeover = await acceptInvitation(app(), token, {
      body: { name: 'pwned', password: 'attacker-chosen-password' },
    });
    expect(expectError(takeover, 401, 'UNAUTHORIZED').details.reason).toBe('SIGN_IN_REQUIRED');
    await expect(signIn(app(), victim.email, 'attacker-chosen-password')).rejects.toThrow(/401/);
    expect(await signIn(app(), victim.email, victim.password)).toContain('session_token=');
    expect((await me(victim.cookie)).json().data).toMatchObject({
      user: { id: victim.userId },
      team: { id: victim.teamId },
      role: 'owner',
    });

    // An address without an account: accepting the emailed link makes one, unverified, so the
    // owner of the address who later signs in with OIDC takes it back from whoever set its password.
    const fresh = newIdentity({ emailVerified: true });
    before = smtp.messages.length;
    expect((await invite(app(), attacker, { email: fresh.email, role: 'member' })).statusCode).toBe(201);
    const squat = await acceptInvitation(app(), await emailedToken(fresh.email, before), {
      body: { name: 'Squatter', password: 'attacker-chosen-password' },
    });
    expect(squat.statusCode, squat.body).toBe(201);
    const squatted = await userByEmail(fresh.email);
    expect(squatted).toMatchObject({ emailVerified: false });

    // Signed in as that address, accepting another emailed link verifies nothing either.
    const second = await attackerWithOwnTeam({ adapter: true });
    before = smtp.messages.length;
    expect((await invite(app(), second, { email: fresh.email, role: 'member' })).statusCode).toBe(201);
    const signedInAccept = await acceptInvitation(app(), await emailedToken(fresh.email, before), {
      user: { cookie: cookieHeaderFrom(squat) },
    });
    expect(signedInAccept.statusCode, signedInAccept.body).toBe(201);
    expect(await userByEmail(fresh.email)).toMatchObject({ emailVerified: false });

    oidc.nextIdentity(fresh);
    const flow = await signInWithProvider(url, 'oidc');
    expect(flow.location).toBe(`${url}/`);
    expect(await userByEmail(fresh.email)).toMatchObject({ id: squatted!.id, emailVerified: true });
    expect(await providersOf(squatted!.id)).toEqual(['oidc']);
    expectError(await me(cookieHeaderFrom(squat)), 401, 'UNAUTHORIZED');
    await expect(signIn(app(), fresh.email, 'attacker-chosen-password')).rejects.toThrow(/401/);
  });

  it('puts a person invited to teams who signs in with OIDC into them with the invited roles', async () => {
    const first = await setupOwner(app());
    const second = await ownerWithAdapter();
    const invitee = newIdentity({ emailVerified: true });
    expect((await invite(app(), first, { email: invitee.email, role: 'viewer' })).statusCode).toBe(201);
    expect((await invite(app(), second, { email: invitee.email, role: 'admin' })).statusCode).toBe(201);

    // Straight from the sign-in page, without opening either link.
    oidc.nextIdentity(invitee);
    const flow = await signInWithProvider(url, 'oidc', { redirectTo: '/templates' });
    expect(flow.location).toBe(`${url}/templates`);
    const session = await me(flow.cookie);
    expect(session.statusCode, session.body).toBe(200);
    expect(session.json().data).toMatchObject({
      user: { email: invitee.email },
      team: { id: first.teamId },
      role: 'viewer',
    });
    expect(session.json().data.teams.map((t: { id: string; role: string }) => [t.id, t.role])).toEqual([
      [first.teamId, 'viewer'],
      [second.teamId, 'admin'],
    ]);
    const userId = session.json().data.user.id as string;
    expect((await listMembers(app(), second)).find((m) => m.userId === userId)).toMatchObject({
      role: 'admin',
    });
    for (const owner of [first, second]) {
      const pending = await asUser(app(), owner, 'GET', '/api/team/invitations');
      expect(pending.json().data).toEqual([]);
    }
  });
});
