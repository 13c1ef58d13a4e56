import type { FastifyReply, FastifyRequest } from 'fastify';
import { describe, expect, it, vi } from 'vitest';
import { access, registerAccessGuards } from './access.ts';
import { AppError } from './errors.ts';

/**
 * access() installs the guards the composition root registered (issue #9: http imports no module).
 * The guards here only record which one ran; the real ones are covered by the access matrix
 * (server/test/access-matrix.test.ts).
 */
const reply = {} as FastifyReply;
const requestWith = (headers: Record<string, string>) => ({ headers }) as unknown as FastifyRequest;
/** The single onRequest hook access() installed (guardFor's hooks take request and reply only). */
const hookOf = (options: ReturnType<typeof access>) =>
  options.onRequest as unknown as (request: FastifyRequest, reply: FastifyReply) => Promise<void>;

describe('access() with registered guards', () => {
  it('needs no guard for a public rule, and refuses to declare a guarded one before registration', async () => {
    // A fresh copy of the module: the other cases register guards in the shared one, in any order.
    vi.resetModules();
    const fresh = await import('./access.ts');
    expect(fresh.access({ kind: 'public' })).toEqual({ config: { access: { kind: 'public' } } });
    expect(() => fresh.access({ kind: 'session' })).toThrow(/no guards registered/);
  });

  it('runs the session guard without X-API-Key and the API key guard with it', async () => {
    const calls: string[] = [];
    registerAccessGuards({
      session:
        (permission, { teamFallback }) =>
        async () => {
          calls.push(`session:${permission ?? '-'}:${teamFallback}`);
        },
      apiKey: (scopes) => async () => {
        calls.push(`apiKey:${scopes.join(',')}`);
      },
    });

    const both = access({ kind: 'session', permission: 'logs:view', apiKeyScopes: ['logs:read'] });
    await hookOf(both)(requestWith({}), reply);
    await hookOf(both)(requestWith({ 'x-api-key': 'k' }), reply);
    const keyOnly = access({ kind: 'apiKey', scopes: ['send'] });
    await hookOf(keyOnly)(requestWith({ 'x-api-key': 'k' }), reply);
    expect(calls).toEqual(['session:logs:view:false', 'apiKey:logs:read', 'apiKey:send']);
  });

  it('refuses an API key on a session-only rule without calling either guard', async () => {
    const calls: string[] = [];
    registerAccessGuards({
      session: () => async () => {
        calls.push('session');
      },
      apiKey: () => async () => {
        calls.push('apiKey');
      },
    });
    const sessionOnly = access({ kind: 'session', teamFallback: true });
    const refused = hookOf(sessionOnly)(requestWith({ 'x-api-key': 'k' }), reply);
    await expect(refused).rejects.toBeInstanceOf(AppError);
    await expect(refused).rejects.toMatchObject({ code: 'UNAUTHORIZED' });
    expect(calls).toEqual([]);
  });
});
