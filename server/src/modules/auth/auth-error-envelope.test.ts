import { describe, expect, it } from 'vitest';
import {
  authErrorToAppError,
  presentAuthResponse,
  presentOAuthCallbackFailure,
} from './auth-error-envelope.ts';

describe('authErrorToAppError', () => {
  it.each([
    [400, 'VALIDATION_ERROR', 'VALIDATION_ERROR', 400],
    [400, 'INVALID_EMAIL', 'INVALID_INPUT', 400],
    [401, 'INVALID_EMAIL_OR_PASSWORD', 'UNAUTHORIZED', 401],
    [403, 'INVALID_ORIGIN', 'FORBIDDEN', 403],
    [404, undefined, 'NOT_FOUND', 404],
    [415, 'UNSUPPORTED_MEDIA_TYPE', 'INVALID_INPUT', 400],
    [422, 'USER_ALREADY_EXISTS', 'ALREADY_EXISTS', 409],
    [422, 'SOMETHING_ELSE', 'INVALID_INPUT', 400],
    [429, undefined, 'RATE_LIMITED', 429],
  ])('maps %i %s to %s (%i)', (status, reason, code, ourStatus) => {
    const error = authErrorToAppError(status, { code: reason, message: 'from better-auth' });
    expect(error.code).toBe(code);
    expect(error.statusCode).toBe(ourStatus);
    expect(error.details).toEqual(reason ? { reason } : {});
  });

  it('hides the message of server errors', () => {
    const error = authErrorToAppError(500, {
      code: 'FAILED_TO_CREATE_SESSION',
      message: 'relation "x" does not exist',
    });
    expect(error.code).toBe('INTERNAL_ERROR');
    expect(error.message).toBe('Internal server error');
    expect(error.details).toEqual({});
  });
});

describe('presentAuthResponse', () => {
  it('re-renders an error in the envelope and keeps Set-Cookie and the retry delay', async () => {
    const headers = new Headers({ 'content-type': 'application/json', 'x-retry-after': '7' });
    headers.append('set-cookie', 'postwright.session_token=; Max-Age=0');
    const original = new Response(JSON.stringify({ message: 'Too many requests' }), { status: 429, headers });
    const presented = await presentAuthResponse(original);
    expect(presented.status).toBe(429);
    expect(presented.headers.get('retry-after')).toBe('7');
    expect(presented.headers.getSetCookie()).toEqual(['postwright.session_token=; Max-Age=0']);
    expect(await presented.json()).toEqual({
      success: false,
      error: { code: 'RATE_LIMITED', message: 'Too many requests', details: { retryAfter: 7 } },
    });
  });

  it('passes successes and non-JSON errors sensibly', async () => {
    const success = new Response('{"ok":true}', { status: 200 });
    expect(await presentAuthResponse(success)).toBe(success);
    const empty = await presentAuthResponse(new Response(null, { status: 404 }));
    expect(await empty.json()).toMatchObject({ success: false, error: { code: 'NOT_FOUND' } });
  });
});

describe('presentOAuthCallbackFailure', () => {
  const login = 'https://mail.example.test/login';
  const refused = () =>
    new Response(null, {
      status: 302,
      headers: { location: `${login}?error=invitation_required&error_description=Ask+for+an+invitation` },
    });
  const callback = (accept: string) =>
    new Request('https://mail.example.test/api/auth/callback/github?code=c&state=s', { headers: { accept } });

  it('keeps the redirect for browsers and answers 403 in the envelope to API callers', async () => {
    const browser = presentOAuthCallbackFailure(callback('text/html,*/*'), refused(), login);
    expect(browser.status).toBe(302);
    const api = presentOAuthCallbackFailure(callback('application/json'), refused(), login);
    expect(api.status).toBe(403);
    expect(api.headers.get('location')).toBeNull();
    expect(await api.json()).toEqual({
      success: false,
      error: {
        code: 'FORBIDDEN',
        message: 'Ask for an invitation',
        details: { reason: 'invitation_required' },
      },
    });
  });

  it('leaves successful callbacks and other routes alone', () => {
    const success = new Response(null, { status: 302, headers: { location: 'https://mail.example.test/' } });
    expect(presentOAuthCallbackFailure(callback('application/json'), success, login)).toBe(success);
    const other = new Request('https://mail.example.test/api/auth/sign-out', {
      headers: { accept: 'application/json' },
    });
    const response = refused();
    expect(presentOAuthCallbackFailure(other, response, login)).toBe(response);
  });
});
