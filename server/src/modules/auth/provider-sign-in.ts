import type { Config } from '../../config.ts';
import type { Database } from '../../db/client.ts';
import { AppError } from '../../http/errors.ts';
import { anyUserExists } from './auth.repository.ts';
import { loginUrl, SETUP_TOKEN_HEADER } from './auth-light.ts';
import type { Auth } from './better-auth.ts';
import { isSetupTokenValid } from './setup-token.ts';
import { isEnabledOAuthProvider } from './sign-in-methods.ts';

/** Sign-in starts allowed per client IP per minute on `GET /api/auth/sign-in/:provider`. */
export const SIGN_IN_STARTS_PER_MINUTE = 10;

/** Where the provider should send the browser, and the cookies (OAuth state) to set first. */
export interface ProviderSignInStart {
  /** The provider's authorization URL with `state`, PKCE `code_challenge` and (OIDC) `nonce`. */
  url: string;
  /** `Set-Cookie` values: better-auth's signed state cookie, checked again on the callback. */
  setCookie: string[];
}

/**
 * Starts an authorization-code sign-in with `provider` through better-auth's social sign-in server
 * API (issue #3 "Sign-in"; RFC 6749 §4.1 with PKCE, RFC 7636, and the OIDC nonce): better-auth
 * stores state, code verifier and nonce, and builds the authorization URL. After the provider,
 * its callback `/api/auth/callback/:provider` sets the session cookie and redirects to
 * `BASE_URL + redirectTo`, or to `BASE_URL/login?error=<code>` when the sign-in is refused.
 *
 * `redirectTo` must already be a same-origin path (auth.schema.ts); `setupToken`, when given,
 * makes this the first-run setup through the provider (issue #2's token).
 * `headers` are the caller's (client IP for better-auth).
 * @throws AppError NOT_FOUND (404) for an unknown or disabled provider; INVALID_TOKEN (401) for a
 *   wrong setup token; CONFLICT (409) for a setup token once setup is done.
 */
export async function startProviderSignIn(
  deps: { config: Config; db: Database; auth: Auth },
  input: { provider: string; redirectTo: string; setupToken?: string | undefined },
  headers: Headers,
): Promise<ProviderSignInStart> {
  const { config } = deps;
  if (!isEnabledOAuthProvider(config, input.provider)) {
    throw new AppError('NOT_FOUND', `Sign-in provider ${input.provider} is not enabled`);
  }
  headers.delete(SETUP_TOKEN_HEADER);
  if (input.setupToken !== undefined) {
    if (!isSetupTokenValid(config, input.setupToken))
      throw new AppError('INVALID_TOKEN', 'Invalid setup token');
    if (await anyUserExists(deps.db)) throw new AppError('CONFLICT', 'Setup has already been completed');
    headers.set(SETUP_TOKEN_HEADER, input.setupToken);
  }
  const started = await deps.auth.api.signInSocial({
    body: {
      provider: input.provider,
      callbackURL: `${config.BASE_URL}${input.redirectTo}`,
      errorCallbackURL: loginUrl(config),
      disableRedirect: true,
    },
    headers,
    returnHeaders: true,
  });
  const url = started.response.url;
  if (!url) throw new AppError('INTERNAL_ERROR', 'The provider returned no authorization URL');
  return { url, setCookie: started.headers.getSetCookie() };
}
