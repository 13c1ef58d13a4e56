import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestContext, type TestContext } from './helpers/app.ts';
import { addTeamMember, setupOwner } from './helpers/auth.ts';
import { startCli } from './helpers/process.ts';
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
    const cli = startCli(['delete-user', email], {
      DATABASE_URL: ctx.app.ctx.database.connectionString,
      DATA_DIR: 'memory://',
      ENCRYPTION_KEY: Buffer.alloc(32, 7).toString('base64'),
    });
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

    // A team's only owner is refused, and so is an unknown address.
    const ownerRefused = await run(owner.email);
    expect(ownerRefused.code).toBe(1);
    expect(ownerRefused.output).toContain('only owner');
    expect((await asUser(ctx.app, owner, 'GET', '/api/auth/me')).statusCode).toBe(200);
    const unknown = await run('nobody@example.test');
    expect(unknown.code).toBe(1);
    expect(unknown.output).toContain('No account');
    // A member who is not an owner goes, and the team keeps its owner.
    const member = await addTeamMember(ctx.app, owner, 'admin');
    expect((await run(member.email)).code).toBe(0);
    expect((await listMembers(ctx.app, owner)).map((m) => m.userId)).not.toContain(member.userId);
  });
});
