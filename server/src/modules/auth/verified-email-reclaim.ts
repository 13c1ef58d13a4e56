import type { BetterAuthPlugin } from 'better-auth';
import { createAuthMiddleware, getOAuthState } from 'better-auth/api';
import type { Database } from '../../db/client.ts';
import { lockUnverifiedUserByEmail, reclaimUnverifiedUser } from './auth.repository.ts';

/** What a provider's `getUserInfo` answers, as far as this module reads it. */
interface ProviderUserInfo {
  user?: { email?: string | null; emailVerified?: boolean | string | null } | null;
}

/** The part of a better-auth OAuth provider (social or genericOAuth) this module touches. */
interface OAuthProviderLike {
  id: string;
  getUserInfo: (token: never) => Promise<ProviderUserInfo | null>;
}

/** Where the reclaim reports what it did (pino's signature; the app logger in production). */
export interface ReclaimLog {
  info: (details: object, message: string) => void;
}

/**
 * The provider verified `email` (its `email_verified` claim, GitHub's verified primary address).
 * better-auth passes the claim through as a boolean or the string "true".
 */
function isVerifiedEmail(info: ProviderUserInfo | null): info is { user: { email: string } } {
  const verified = info?.user?.emailVerified;
  return typeof info?.user?.email === 'string' && (verified === true || verified === 'true');
}

/** True for an OAuth callback that signs in (not one that links a provider to the signed-in user). */
async function isSignInCallback(): Promise<boolean> {
  try {
    const state = await getOAuthState();
    return state !== null && state !== undefined && !state.link;
  } catch {
    return false; // not inside a better-auth request
  }
}

/**
 * better-auth plugin enforcing issue #8: "a provider sign-in may never attach to an account whose
 * email is unverified: instead that account's password is removed and its sessions revoked".
 *
 * better-auth itself (with `requireLocalEmailVerified: true`) refuses to link a provider identity
 * to a local user whose email is unverified, which would leave the real owner of the address locked
 * out by whoever registered it first (e.g. through an invitation link shown to an inviter). So right
 * after a provider answered a sign-in callback with a verified email, and before better-auth looks
 * the user up, an unverified account with that email is reclaimed for the person who just proved
 * they own it (auth.repository `reclaimUnverifiedUser`: password credential deleted, every session
 * deleted, email marked verified). better-auth then links the identity and signs in as usual.
 *
 * The hook point is each provider's `getUserInfo` (called once the code, PKCE verifier, state and,
 * for OIDC, the ID token were checked): wrapped in place at init and again before each callback, for
 * genericOAuth providers whose discovery only succeeds later. Link flows (`state.link`) are left
 * alone: there a signed-in user adds a provider to their own account.
 */
export function verifiedEmailReclaim(deps: { db: Database; log?: ReclaimLog }): BetterAuthPlugin {
  const wrapped = new WeakSet<object>();

  const reclaim = async (providerId: string, email: string): Promise<void> => {
    const userId = await deps.db.transaction(async (tx) => {
      const id = await lockUnverifiedUserByEmail(tx, email);
      if (id) await reclaimUnverifiedUser(tx, id);
      return id;
    });
    if (userId) {
      deps.log?.info(
        { userId, providerId },
        'provider verified the email of an unverified account: its password and sessions were removed',
      );
    }
  };

  const wrapAll = (providers: OAuthProviderLike[]): void => {
    // better-auth 1.7 keeps them in an array; without one there is nothing to wrap (and its own
    // refusal to link to an unverified account still holds).
    if (!Array.isArray(providers)) return;
    for (const provider of providers) {
      if (wrapped.has(provider)) continue;
      const getUserInfo = provider.getUserInfo.bind(provider);
      provider.getUserInfo = async (token) => {
        const info = await getUserInfo(token);
        if (isVerifiedEmail(info) && (await isSignInCallback())) await reclaim(provider.id, info.user.email);
        return info;
      };
      wrapped.add(provider);
    }
  };

  return {
    id: 'postwright-verified-email-reclaim',
    init: (context) => {
      wrapAll(context.socialProviders as unknown as OAuthProviderLike[]);
    },
    hooks: {
      before: [
        {
          matcher: (context) => context.path?.startsWith('/callback/') === true,
          handler: createAuthMiddleware(async (context) => {
            wrapAll(context.context.socialProviders as unknown as OAuthProviderLike[]);
          }),
        },
      ],
    },
  };
}
