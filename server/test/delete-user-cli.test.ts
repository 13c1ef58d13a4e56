import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { deleteUserByEmail } from '../src/modules/teams/index.ts';
import { createTestContext, type TestContext } from './helpers/app.ts';
import { addTeamMember, setupOwner } from './helpers/auth.ts';
import { cliEnvOn, startCli } from './helpers/process.ts';
import {
  acceptInvitation,
  asUser,
  buildInvitation,
  inviteeEmail,
  listMembers,
  tokenOf,
} from './helpers/teams.ts';

/**
 * `postwright delete-user <email>` (review finding, session 15): an invitation link shown to its
 * sender lets whoever holds it create the invited address's account with their own password; with
 * password sign-in only, the address's real owner had no way in. The operator can now delete it.
 */
describe('postwright delete-user', () => {
  let ctx: TestContext;
  beforeAll(async () => {
    ctx = await createTestContext('postgres');
  });
  afterAll(() => ctx?.close());

  const run = async (email: string) => {
    const cli = startCli(['delete-user', email], cliEnvOn(ctx.app.ctx.database.connectionString));
    const code = await new Promise<number | null>((resolve) => cli.child.once('exit', resolve));
    return { code, output: cli.output() };
  };

  it('frees a squatted address: deletes the account, its sessions and memberships; refuses a team’s only owner', async () => {
    const owner = await setupOwner(ctx.app);
    const company = await setupOwner(ctx.app);
    // A team without an adapter: the invitation's link comes back to its sender, who accepts it
    // with a password of their choice.
    const victim = inviteeEmail('victim').toLowerCase();
    const squat = await buildInvitation(ctx.app, owner, { email: victim, role: 'viewer' });
    const taken = await acceptInvitation(ctx.app, tokenOf(squat.url), {
      body: { name: 'Squatter', password: 'squatter-password' },
    });
    expect(taken.statusCode, taken.body).toBe(201);
    const squatterCookie = taken.headers['set-cookie'];
    const genuine = await buildInvitation(ctx.app, company, { email: victim, role: 'member' });
    const refused = await acceptInvitation(ctx.app, tokenOf(genuine.url), {
      body: { name: 'Victim', password: 'victims-own-password' },
    });
    expect(refused.statusCode).toBe(401);

    const deleted = await run(victim.toUpperCase());
    expect(deleted.code, deleted.output).toBe(0);
    expect(deleted.output).toContain(`Deleted ${victim.toUpperCase()}`);
    expect((await listMembers(ctx.app, owner)).map((m) => m.email)).not.toContain(victim);
    const stale = await ctx.app.inject({
      method: 'GET',
      url: '/api/auth/me',
      headers: { cookie: String(squatterCookie).split(';')[0] },
    });
    expect(stale.statusCode).toBe(401);
    // The address's owner can now take it with the invitation they got before the deletion.
    const accepted = await acceptInvitation(ctx.app, tokenOf(genuine.url), {
      body: { name: 'Victim', password: 'victims-own-password' },
    });
    expect(accepted.statusCode, accepted.body).toBe(201);

    // The only owner of a team with other members is refused (one who is its only member goes with
    // the team: delete-user-own-teams.test.ts), and so is an unknown address.
    const member = await addTeamMember(ctx.app, owner, 'admin');
    const ownerRefused = await run(owner.email);
    expect(ownerRefused.code).toBe(1);
    expect(ownerRefused.output).toContain('only owner');
    expect((await asUser(ctx.app, owner, 'GET', '/api/auth/me')).statusCode).toBe(200);
    const unknown = await run('nobody@example.test');
    expect(unknown.code).toBe(1);
    expect(unknown.output).toContain('No account');
    // A member who is not an owner goes, and the team keeps its owner.
    expect((await run(member.email)).code).toBe(0);
    expect((await listMembers(ctx.app, owner)).map((m) => m.userId)).not.toContain(member.userId);
  });

  it("checks the last-owner rule on the roles held once the user's teams are locked", async () => {
    // Review finding, session 16: the roles were read before the locks; while the command waited
    // for one team, the other team's owner made the user its owner and left, and the user was
    // deleted, leaving that team without an owner.
    const ownerA = await setupOwner(ctx.app);
    const ownerB = await setupOwner(ctx.app);
    const user = await addTeamMember(ctx.app, ownerA, 'member');
    const invitation = await buildInvitation(ctx.app, ownerB, { email: user.email, role: 'member' });
    const joined = await acceptInvitation(ctx.app, tokenOf(invitation.url), { user });
    expect(joined.statusCode, joined.body).toBeLessThan(300);
    // The command locks teams in id order: hold the first one's lock.
    const [first, second] = [ownerA, ownerB].sort((a, b) => (a.teamId < b.teamId ? -1 : 1));
    // The second team keeps a member besides the user: a team the user is the only member of would
    // be deleted with them.
    await addTeamMember(ctx.app, second!, 'member');
    const blocker = await ctx.app.ctx.database.pool.connect();
    try {
      await blocker.query('begin');
      await blocker.query('select pg_advisory_xact_lock(hashtext($1))', [`team-members:${first!.teamId}`]);
      const deleting = deleteUserByEmail(ctx.app.ctx.database.db, user.email).catch(
        (error: unknown) => error,
      );
      await new Promise((resolve) => setTimeout(resolve, 300));
      // Meanwhile the other team's owner makes the user owner and leaves.
      const promoted = await asUser(ctx.app, second!, 'PUT', `/api/team/members/${user.userId}`, {
        role: 'owner',
      });
      expect(promoted.statusCode, promoted.body).toBe(200);
      const left = await asUser(ctx.app, second!, 'DELETE', `/api/team/members/${second!.userId}`);
      expect(left.statusCode, left.body).toBe(200);
      await blocker.query('commit');
      const outcome = await deleting;
      expect(outcome).toMatchObject({ code: 'CONFLICT' });
    } finally {
      blocker.release();
    }
    const { rows } = await ctx.app.ctx.database.pool.query(
      `select user_id from members where team_id = $1 and role = 'owner'`,
      [second!.teamId],
    );
    expect(rows.map((row: { user_id: string }) => row.user_id)).toEqual([user.userId]);
  });
});
