import type { Config } from '../../config.ts';

/** The ids of the sign-in methods; the OAuth ones are also better-auth's provider ids. */
export const SIGN_IN_METHOD_IDS = ['password', 'github', 'google', 'oidc'] as const;
export type SignInMethodId = (typeof SIGN_IN_METHOD_IDS)[number];
export type OAuthProviderId = Exclude<SignInMethodId, 'password'>;

/** One entry of `GET /api/auth/providers`: what the sign-in page shows as a button or form. */
export interface SignInMethod {
  id: SignInMethodId;
  /** Label for the button: "Email and password", "GitHub", "Google", or OIDC_NAME. */
  name: string;
  type: 'password' | 'oauth';
}

/** The client credentials of one OAuth provider. */
export interface OAuthClient {
  clientId: string;
  clientSecret: string;
}

/** The generic OpenID Connect provider (OIDC_* variables). */
export interface OidcClient extends OAuthClient {
  issuer: string;
  name: string;
}

/** The GitHub client when both GITHUB_* variables are set (config.ts guarantees they come in pairs). */
export function githubClient(config: Config): OAuthClient | null {
  const { GITHUB_CLIENT_ID: clientId, GITHUB_CLIENT_SECRET: clientSecret } = config;
  return clientId && clientSecret ? { clientId, clientSecret } : null;
}

/** The Google client when both GOOGLE_* variables are set. */
export function googleClient(config: Config): OAuthClient | null {
  const { GOOGLE_CLIENT_ID: clientId, GOOGLE_CLIENT_SECRET: clientSecret } = config;
  return clientId && clientSecret ? { clientId, clientSecret } : null;
}

/** The OpenID Connect client when OIDC_ISSUER, OIDC_CLIENT_ID and OIDC_CLIENT_SECRET are set. */
export function oidcClient(config: Config): OidcClient | null {
  const { OIDC_ISSUER: issuer, OIDC_CLIENT_ID: clientId, OIDC_CLIENT_SECRET: clientSecret } = config;
  if (!issuer || !clientId || !clientSecret) return null;
  return { issuer: issuer.replace(/\/+$/, ''), clientId, clientSecret, name: config.OIDC_NAME };
}

/**
 * The sign-in methods this instance offers, in display order (issue #3 "Sign-in"): email and
 * password unless AUTH_PASSWORD=false, then GitHub, Google and OpenID Connect for each provider
 * whose variables are set.
 */
export function enabledSignInMethods(config: Config): SignInMethod[] {
  const methods: SignInMethod[] = [];
  if (config.AUTH_PASSWORD) methods.push({ id: 'password', name: 'Email and password', type: 'password' });
  if (githubClient(config)) methods.push({ id: 'github', name: 'GitHub', type: 'oauth' });
  if (googleClient(config)) methods.push({ id: 'google', name: 'Google', type: 'oauth' });
  const oidc = oidcClient(config);
  if (oidc) methods.push({ id: 'oidc', name: oidc.name, type: 'oauth' });
  return methods;
}

/** True when `id` names an OAuth provider that is enabled on this instance. */
export function isEnabledOAuthProvider(config: Config, id: string): id is OAuthProviderId {
  return enabledSignInMethods(config).some((method) => method.type === 'oauth' && method.id === id);
}
