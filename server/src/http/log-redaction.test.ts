import { describe, expect, it } from 'vitest';
import { redactUrl } from './log-redaction.ts';

describe('redactUrl', () => {
  it('hides secret query values and invitation ids, keeps the rest', () => {
    expect(redactUrl('/api/auth/sign-in/oidc?redirectTo=%2Fx&setupToken=abc123')).toBe(
      '/api/auth/sign-in/oidc?redirectTo=%2Fx&setupToken=%5Bredacted%5D',
    );
    expect(redactUrl('/api/auth/invitations/inv_secret/accept')).toBe(
      '/api/auth/invitations/[redacted]/accept',
    );
    expect(redactUrl('/api/templates?page=2')).toBe('/api/templates?page=2');
  });
});
