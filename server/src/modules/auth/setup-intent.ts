import { addOAuthServerContext, createAuthMiddleware } from 'better-auth/api';
import type { Config } from '../../config.ts';
import { SETUP_TOKEN_HEADER } from './auth-light.ts';
import { isSetupTokenValid } from './setup-token.ts';
import { SETUP_SERVER_CONTEXT_KEY } from './sign-up-policy.ts';

/*
 * The parts of provider sign-in that better-auth is configured with (its error page and the
 * setup-intent hook). Kept apart from provider-sign-in.ts, which calls the built better-auth
 * instance, so the two do not import each other (issue #9, no import cycles).
 */

/**
 * better-auth `hooks.before` middleware: on `/sign-in/social` with a valid {@link SETUP_TOKEN_HEADER},
 * records the setup intent in the OAuth server context, which travels in the state to the callback
 * (where sign-up-policy.ts reads it) and, unlike the request's `additionalData`, cannot come from
 * the client.
 */
export function setupIntentMiddleware(config: Pick<Config, 'SETUP_TOKEN'>) {
  return createAuthMiddleware(async (ctx) => {
    if (ctx.path !== '/sign-in/social') return;
    const token = ctx.headers?.get(SETUP_TOKEN_HEADER);
    if (token && isSetupTokenValid(config, token)) {
      await addOAuthServerContext({ [SETUP_SERVER_CONTEXT_KEY]: true });
    }
  });
}
