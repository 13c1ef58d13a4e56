import { APIError, addOAuthServerContext, createAuthMiddleware } from 'better-auth/api';
import { z } from 'zod';
import type { Config } from '../../config.ts';
import { SETUP_TOKEN_HEADER } from './auth-light.ts';
import { isSetupTokenValid } from './setup-token.ts';
import { SETUP_SERVER_CONTEXT_KEY } from './sign-up-policy.ts';

/*
 * better-auth's `hooks.before`: the parts of its endpoints that Postwright decides. Kept apart from
 * provider-sign-in.ts, which calls the built better-auth instance, so the two do not import each
 * other (issue #9, no import cycles).
 */

/** What `POST /api/auth/update-user` may change: the display name, as every other form bounds it. */
const updateUserBody = z.strictObject({ name: z.string().trim().min(1).max(100) });

/**
 * better-auth `hooks.before` middleware:
 * - `/sign-in/social` with a valid {@link SETUP_TOKEN_HEADER} records the setup intent in the OAuth
 *   server context, which travels in the state to the callback (where sign-up-policy.ts reads it)
 *   and, unlike the request's `additionalData`, cannot come from the client.
 * - `/change-password` always ends the user's other sessions (`revokeOtherSessions: true`): a
 *   password is changed mostly because it leaked, and better-auth kept every other session alive
 *   unless the caller asked (review finding, session 15).
 * - `/update-user` takes only `name`, a string of 1-100 characters once trimmed (the setup and
 *   invitation forms' bound); better-auth stored any JSON value of any length as the name, and an
 *   `image` (review finding, session 15).
 * @throws better-auth APIError 400 with code VALIDATION_ERROR for another update-user body (our
 *   envelope: 400 VALIDATION_ERROR).
 */
export function authBeforeHooks(config: Pick<Config, 'SETUP_TOKEN'>) {
  return createAuthMiddleware(async (ctx) => {
    if (ctx.path === '/sign-in/social') {
      const token = ctx.headers?.get(SETUP_TOKEN_HEADER);
      if (token && isSetupTokenValid(config, token)) {
        await addOAuthServerContext({ [SETUP_SERVER_CONTEXT_KEY]: true });
      }
      return;
    }
    if (ctx.path === '/change-password') {
      return { context: { body: { ...ctx.body, revokeOtherSessions: true } } };
    }
    if (ctx.path !== '/update-user') return;
    const parsed = updateUserBody.safeParse(ctx.body);
    if (!parsed.success) {
      throw new APIError('BAD_REQUEST', {
        code: 'VALIDATION_ERROR',
        message: `update-user takes only a name of 1-100 characters (${parsed.error.issues
          .map((issue) => `${issue.path.join('.') || 'body'}: ${issue.message}`)
          .join('; ')})`,
      });
    }
    return { context: { body: parsed.data } };
  });
}
