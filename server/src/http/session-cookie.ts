/** Prefix of the auth library's cookie names: the session cookie is `postwright.session_token`. */
export const COOKIE_PREFIX = 'postwright';

/**
 * Whether the auth library's cookies are `Secure` and carry the `__Secure-` prefix: when BASE_URL
 * is https (better-auth's own default, set explicitly from here so that the documented name and
 * the real one come from one rule).
 */
export function usesSecureCookies(baseUrl: string): boolean {
  return new URL(baseUrl).protocol === 'https:';
}

/**
 * The session cookie's name for BASE_URL `baseUrl`: `postwright.session_token`, or
 * `__Secure-postwright.session_token` on https (better-auth's `createCookieGetter`; review finding:
 * the document named the http one on every install, so a client following it got 401 on https).
 */
export function sessionCookieName(baseUrl: string): string {
  return `${usesSecureCookies(baseUrl) ? '__Secure-' : ''}${COOKIE_PREFIX}.session_token`;
}
