/**
 * Session tokens stay in the HttpOnly session cookie (security review, session 12).
 *
 * better-auth 1.7 answers `GET /get-session` with `{session: {token, …}, user}`, `GET
 * /list-sessions` with every active session of the user, each with its `token`, and `POST
 * /sign-in/email` with `{token, …}`: the very value its cookie carries (the cookie is that token
 * and its signature), handed to any script of the page. With them a script injected into the
 * dashboard, or anything else that can read one response, could carry off the user's sessions on
 * every device and replay them from elsewhere until they expire, which HttpOnly exists to
 * prevent. (better-auth masked them in list-sessions once and reverted it because
 * `/revoke-session` takes the token: better-auth pull request #6749; that endpoint is closed here,
 * see `OPEN_AUTH_PATHS`.) `POST /change-password` with `revokeOtherSessions` answers `{token,
 * user}` as well. So every JSON answer of better-auth's open endpoints is masked, not a list of
 * paths: none of them has a `token` a client needs. Nothing of Postwright reads them: the
 * dashboard uses `/api/auth/me`.
 */

/** A copy of `value` without its own `token` property (objects only; anything else as is). */
function withoutToken(value: unknown): unknown {
  if (value === null || typeof value !== 'object' || Array.isArray(value)) return value;
  const { token: _token, ...rest } = value as Record<string, unknown>;
  return rest;
}

/**
 * `body` of a better-auth answer without session tokens: the top-level `token` (sign-in,
 * change-password), `session.token` (get-session) and each listed session's `token`.
 */
export function maskSessionTokens(body: unknown): unknown {
  if (Array.isArray(body)) return body.map(withoutToken);
  if (body === null || typeof body !== 'object') return body;
  const masked = withoutToken(body) as Record<string, unknown>;
  if ('session' in masked) masked.session = withoutToken(masked.session);
  return masked;
}

/**
 * `response` (of a better-auth endpoint) as the client gets it: a 2xx JSON answer rewritten by
 * {@link maskSessionTokens}, with every other header kept (the Set-Cookie of a sign-in or of a
 * refreshed session); any other response untouched.
 */
export async function withoutSessionTokens(response: Response): Promise<Response> {
  if (response.status < 200 || response.status >= 300) return response;
  if (!(response.headers.get('content-type') ?? '').includes('application/json')) return response;
  const text = await response.text();
  let body: unknown;
  try {
    body = JSON.parse(text);
  } catch {
    return new Response(text, { status: response.status, headers: response.headers });
  }
  const headers = new Headers(response.headers);
  headers.delete('content-length');
  return new Response(JSON.stringify(maskSessionTokens(body)), { status: response.status, headers });
}
