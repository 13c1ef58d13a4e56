import { randomBytes } from 'node:crypto';
import { sql } from 'drizzle-orm';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { newUnguessableId } from '../src/ids.ts';
import { insertMember, insertTeam, insertUserWithPassword } from '../src/modules/auth/auth.repository.ts';
import { newInvitationToken } from '../src/modules/teams/invitation-token.ts';
import { teamRepository } from '../src/modules/teams/teams.repository.ts';
import { createTestContext, type TestContext } from './helpers/app.ts';
import { addTeamMember, type OidcProvider, setupOwner, startOidcProvider } from './helpers/auth.ts';
import { buildSmtpAdapter, expectError } from './helpers/factories.ts';
import { closedPort } from './helpers/smtp-server.ts';
import { acceptInvitation, asUser, buildInvitation, inviteeEmail, tokenOf } from './helpers/teams.ts';

const DAY_MS = 24 * 60 * 60 * 1000;

/** The status, code and details of an error answer: what a caller can tell two answers apart by. */
function errorShape(response: { statusCode: number; json: () => any }) {
  const { code, details } = response.json().error;
  return { status: response.statusCode, code, details };
}

describe('team invitation rules (PostgreSQL)', () => {
  let ctx: TestContext;

  beforeAll(async () => {
    ctx = await createTestContext('postgres');
  });
  afterAll(async () => {
    await ctx?.close();
  });

  const app = () => ctx.app;

  async function pendingIds(user: { cookie: string }): Promise<string[]> {
    const list = await asUser(app(), user, 'GET', '/api/team/invitations');
    expect(list.statusCode, list.body).toBe(200);
    return list.json().data.map((i: { id: string }) => i.id);
  }

  it("lets only owners cancel an owner's invitation, as only they create or renew one", async () => {
    const owner = await setupOwner(app());
    const admin = await addTeamMember(app(), owner, 'admin');
    const forOwner = await buildInvitation(app(), owner, { role: 'owner' });

    const byAdmin = await asUser(app(), admin, 'DELETE', `/api/team/invitations/${forOwner.id}`);
    expect(expectError(byAdmin, 403, 'FORBIDDEN').details.reason).toBe('OWNER_REQUIRED');
    expect(await pendingIds(owner)).toContain(forOwner.id);
    const shown = await app().inject({
      method: 'GET',
      url: `/api/auth/invitations/${tokenOf(forOwner.url)}`,
    });
    expect(shown.json().data).toMatchObject({ status: 'pending', role: 'owner' });

    // An admin still cancels the invitations they may make.
    const forAdmin = await buildInvitation(app(), admin, { role: 'admin' });
    const adminCancels = await asUser(app(), admin, 'DELETE', `/api/team/invitations/${forAdmin.id}`);
    expect(adminCancels.statusCode, adminCancels.body).toBe(200);

    const byOwner = await asUser(app(), owner, 'DELETE', `/api/team/invitations/${forOwner.id}`);
    expect(byOwner.statusCode, byOwner.body).toBe(200);
    expect(byOwner.json()).toEqual({ success: true });
    expect(await pendingIds(owner)).not.toContain(forOwner.id);
    // Another team's admin finds nothing to cancel, owner's invitation or not.
    const other = await setupOwner(app());
    const otherForOwner = await buildInvitation(app(), other, { role: 'owner' });
    expectError(
      await asUser(app(), admin, 'DELETE', `/api/team/invitations/${otherForOwner.id}`),
      404,
      'NOT_FOUND',
    );
  });

  it('a renewal ends the earlier links at once, also one an admin was shown for a lesser role', async () => {
    // Review finding, session 16: a renewal by email kept the token until its email job ran, so
    // the admin's link of a member invitation, renewed by the owner as owner, accepted as owner.
    const owner = await setupOwner(app());
    const admin = await addTeamMember(app(), owner, 'admin');
    const email = inviteeEmail('renewed');
    const first = await buildInvitation(app(), admin, { email, role: 'member' });
    expect(first.delivery.status).toBe('skipped'); // no adapter yet: the admin is shown the link
    await buildSmtpAdapter(app(), owner, await closedPort(), { name: 'Mail', isDefault: true });
    const renewed = await asUser(app(), owner, 'POST', '/api/team/invitations', { email, role: 'owner' });
    expect(renewed.statusCode, renewed.body).toBe(200);
    expect(renewed.json().data).toMatchObject({
      id: first.id,
      role: 'owner',
      delivery: { status: 'queued' },
    });
    // No worker runs here: the renewal's email (and its new link) has not gone out yet.
    const accepted = await acceptInvitation(app(), tokenOf(first.url), {
      body: { name: 'Mallory', password: 'a long password 123' },
    });
    expectError(accepted, 404, 'NOT_FOUND');
    expect((await asUser(app(), owner, 'GET', '/api/team/members')).json().data).toHaveLength(2);
  });

  describe('an invitation does not outlive what its sender may grant (review finding, session 13)', () => {
    const newAccount = { name: 'Returning', password: 'a-long-enough-password' };

    it('a removed admin cannot come back through an invitation they sent: it is canceled with them', async () => {
      const owner = await setupOwner(app());
      const admin = await addTeamMember(app(), owner, 'admin');
      const backdoor = await buildInvitation(app(), admin, { role: 'admin' });
      const removed = await asUser(app(), owner, 'DELETE', `/api/team/members/${admin.userId}`);
      expect(removed.statusCode, removed.body).toBe(200);
      expect(await pendingIds(owner)).not.toContain(backdoor.id);
      const accepted = await acceptInvitation(app(), tokenOf(backdoor.url), { body: newAccount });
      expectError(accepted, 404, 'NOT_FOUND');
    });

    it("an admin demoted to member loses the invitations they sent; an owner demoted to admin only the owners'", async () => {
      const owner = await setupOwner(app());
      const admin = await addTeamMember(app(), owner, 'admin');
      const byAdmin = await buildInvitation(app(), admin, { role: 'admin' });
      const secondOwner = await addTeamMember(app(), owner, 'owner');
      const forOwner = await buildInvitation(app(), secondOwner, { role: 'owner' });
      const forMember = await buildInvitation(app(), secondOwner, { role: 'member' });
      for (const [userId, role] of [
        [admin.userId, 'member'],
        [secondOwner.userId, 'admin'],
      ] as const) {
        const changed = await asUser(app(), owner, 'PUT', `/api/team/members/${userId}`, { role });
        expect(changed.statusCode, changed.body).toBe(200);
      }
      const pending = await pendingIds(owner);
      expect(pending).not.toContain(byAdmin.id);
      expect(pending).not.toContain(forOwner.id);
      expect(pending).toContain(forMember.id);
      expectError(
        await acceptInvitation(app(), tokenOf(byAdmin.url), { body: newAccount }),
        404,
        'NOT_FOUND',
      );
      const accepted = await acceptInvitation(app(), tokenOf(forMember.url), { body: newAccount });
      expect(accepted.statusCode, accepted.body).toBe(201);
      expect(accepted.json().data.role).toBe('member');
    });

    it('a removed owner cannot take the team back through an owner invitation they sent', async () => {
      const owner = await setupOwner(app());
      const secondOwner = await addTeamMember(app(), owner, 'owner');
      const backdoor = await buildInvitation(app(), secondOwner, { role: 'owner' });
      const removed = await asUser(app(), owner, 'DELETE', `/api/team/members/${secondOwner.userId}`);
      expect(removed.statusCode, removed.body).toBe(200);
      expectError(
        await acceptInvitation(app(), tokenOf(backdoor.url), { body: newAccount }),
        404,
        'NOT_FOUND',
      );
      const members = await asUser(app(), owner, 'GET', '/api/team/members');
      expect(members.json().data.map((m: { role: string }) => m.role)).toEqual(['owner']);
    });

    it('accepting checks the sender again (an invitation left pending by an earlier build)', async () => {
      const owner = await setupOwner(app());
      const admin = await addTeamMember(app(), owner, 'admin');
      const left = await buildInvitation(app(), admin, { role: 'admin' });
      // Removed without the service (as an earlier build did): the invitation stays pending.
      await ctx.context.database.db.execute(
        sql`delete from members where user_id = ${admin.userId} and team_id = ${owner.teamId}`,
      );
      expect(await pendingIds(owner)).toContain(left.id);
      const accepted = await acceptInvitation(app(), tokenOf(left.url), { body: newAccount });
      expect(expectError(accepted, 404, 'NOT_FOUND').details).toMatchObject({ reason: 'INVITER_REVOKED' });
    });
  });

  it('answers an accept without a session the same whether or not an account has the invited email', async () => {
    const owner = await setupOwner(app());
    const existing = await setupOwner(app());
    // No adapter: the link is shown to the inviter, who could probe emails with it.
    const forExisting = tokenOf((await buildInvitation(app(), owner, { email: existing.email })).url);
    const forFresh = tokenOf((await buildInvitation(app(), owner, { email: inviteeEmail() })).url);

    const bodies = [undefined, {}, { name: 'Probe' }, { name: 'Probe', password: 'short' }];
    for (const body of bodies) {
      const toExisting = await acceptInvitation(app(), forExisting, { body });
      const toFresh = await acceptInvitation(app(), forFresh, { body });
      expectError(toExisting, 400, 'VALIDATION_ERROR');
      expect(errorShape(toExisting), JSON.stringify(body)).toEqual(errorShape(toFresh));
      expect(toExisting.json().error.message).toBe(toFresh.json().error.message);
    }
    // With a valid name and password, an existing account still has to sign in.
    const withAccount = await acceptInvitation(app(), forExisting, {
      body: { name: 'Probe', password: 'password123' },
    });
    expect(expectError(withAccount, 401, 'UNAUTHORIZED').details.reason).toBe('SIGN_IN_REQUIRED');
  });
});

describe('team invitation rules with password sign-in off (PostgreSQL)', () => {
  let ctx: TestContext;
  let oidc: OidcProvider;

  beforeAll(async () => {
    oidc = await startOidcProvider();
    ctx = await createTestContext('postgres', { AUTH_PASSWORD: 'false', ...oidc.env });
  });
  afterAll(async () => {
    await ctx?.close();
    await oidc?.close();
  });

  /** A team with an owner, inserted directly, and a pending invitation for `email` with its token. */
  async function invitationFor(email: string): Promise<string> {
    const passwordHash = await (await ctx.app.ctx.auth.$context).password.hash('an unused password');
    const { token, tokenHash } = newInvitationToken();
    await ctx.app.ctx.database.db.transaction(async (tx) => {
      const owner = await insertUserWithPassword(tx, {
        name: 'Olivia Owner',
        email: `owner-${randomBytes(5).toString('hex')}@example.test`,
        passwordHash,
      });
      const team = await insertTeam(tx, { name: 'SSO Team', slug: `sso-${randomBytes(4).toString('hex')}` });
      await insertMember(tx, { teamId: team.id, userId: owner.id, role: 'owner' });
      await teamRepository.insertInvitation(tx, {
        id: newUnguessableId('invitation'),
        organizationId: team.id,
        email,
        role: 'member',
        status: 'pending',
        expiresAt: new Date(Date.now() + DAY_MS),
        inviterId: owner.id,
        tokenHash,
        tokenEmailed: false,
      });
    });
    return token;
  }

  it('answers an accept without a session the same whether or not an account has the invited email', async () => {
    const existingEmail = `existing-${randomBytes(5).toString('hex')}@example.test`;
    const passwordHash = await (await ctx.app.ctx.auth.$context).password.hash('an existing password');
    await insertUserWithPassword(ctx.app.ctx.database.db, {
      name: 'Eve Existing',
      email: existingEmail,
      passwordHash,
    });
    const forExisting = await invitationFor(existingEmail);
    const forFresh = await invitationFor(`fresh-${randomBytes(5).toString('hex')}@example.test`);

    for (const body of [undefined, { name: 'Probe', password: 'password123' }]) {
      const toExisting = await acceptInvitation(ctx.app, forExisting, { body });
      const toFresh = await acceptInvitation(ctx.app, forFresh, { body });
      expect(expectError(toExisting, 403, 'FORBIDDEN').details.reason).toBe('PASSWORD_SIGN_IN_DISABLED');
      expect(errorShape(toExisting), JSON.stringify(body)).toEqual(errorShape(toFresh));
    }
  });
});
