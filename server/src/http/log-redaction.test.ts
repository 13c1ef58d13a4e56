import { describe, expect, it } from 'vitest';
import { errorForLog, redactUrl } from './log-redaction.ts';

describe('redactUrl', () => {
  it('hides secret query values and invitation tokens, keeps the rest', () => {
    expect(redactUrl('/api/auth/sign-in/oidc?redirectTo=%2Fx&setupToken=abc123')).toBe(
      '/api/auth/sign-in/oidc?redirectTo=%2Fx&setupToken=%5Bredacted%5D',
    );
    expect(redactUrl('/api/auth/invitations/inv_secret/accept')).toBe(
      '/api/auth/invitations/[redacted]/accept',
    );
    expect(redactUrl('/api/templates?page=2')).toBe('/api/templates?page=2');
  });

  it('hides an invitation token inside a redirect target', () => {
    const redacted = redactUrl('/api/auth/sign-in/oidc?redirectTo=%2Finvite%2Fs3cr3tT0k3n&x=1');
    expect(redacted).not.toContain('s3cr3tT0k3n');
    expect(new URLSearchParams(redacted.split('?')[1]).get('redirectTo')).toBe('/invite/[redacted]');
    expect(redactUrl('/invite/s3cr3tT0k3n?redirectTo=/invite/other')).toBe(
      '/invite/[redacted]?redirectTo=%2Finvite%2F%5Bredacted%5D',
    );
  });
});

describe('redactUrl on secret path tails (issue #11)', () => {
  it('hides the provider events token and keeps the adapter id', () => {
    expect(redactUrl('/api/provider-events/adp_01abc/EzvL56W-1BvIJjJxv6Uks')).toBe(
      '/api/provider-events/adp_01abc/[redacted]',
    );
    expect(redactUrl('/api/provider-events/adp_01abc/tok?x=1')).toBe(
      '/api/provider-events/adp_01abc/[redacted]?x=1',
    );
  });

  it('hides open and click tracking tokens (a click token holds the link)', () => {
    expect(redactUrl('/t/o/eyJlIjoiZW1sXzEifQ.sig')).toBe('/t/o/[redacted]');
    expect(redactUrl('/t/c/eyJ1IjoiaHR0cHM6Ly9hcHAuZXhhbXBsZS5jb20vcmVzZXQ_dG9rZW49UyJ9.sig')).toBe(
      '/t/c/[redacted]',
    );
    expect(redactUrl('/t/other/abc')).toBe('/t/other/abc');
    expect(redactUrl('/api/templates/t/o/x')).toBe('/api/templates/t/o/x');
  });
});

describe('errorForLog', () => {
  it('cuts the statement parameters out of a database error and leaves its cause behind', () => {
    const cause = Object.assign(new Error('duplicate key value violates unique constraint'), {
      code: '23505',
    });
    const error = new Error(
      'Failed query: insert into "users" values ($1, $2)\nparams: usr_1,hunter2-secret',
      {
        cause,
      },
    );
    const logged = errorForLog(error) as Error & { code?: string };
    expect(logged).toBeInstanceOf(Error);
    expect(logged.message).toBe('Failed query: insert into "users" values ($1, $2)\nparams: [redacted]');
    expect(logged.code).toBe('23505');
    expect(logged.cause).toBeUndefined();
    expect(JSON.stringify({ ...logged, message: logged.message, stack: logged.stack })).not.toContain(
      'hunter2-secret',
    );
  });

  it('keeps message and stack of other errors, and passes non-errors through', () => {
    const error = new TypeError('boom', { cause: new Error('params: secret') });
    const logged = errorForLog(error) as Error;
    expect(logged).toMatchObject({ name: 'TypeError', message: 'boom', stack: error.stack });
    expect(logged.cause).toBeUndefined();
    expect(errorForLog('text')).toBe('text');
  });
});
