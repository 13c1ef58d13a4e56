/**
 * The parts of the auth module that routes and guards need before better-auth itself is loaded
 * (issue #9, idle memory: better-auth is imported on the first request that needs it, see
 * lazy-auth.ts). Nothing here imports better-auth at run time.
 */
import type { APIError } from 'better-auth/api';
import type { Config } from '../../config.ts';

/**
 * The request header through which the mount hands better-auth the client IP as Fastify
 * resolved it (`request.ip`: the socket address, or the forwarded one when TRUST_PROXY is on).
 * The mount overwrites whatever a client sent in it.
 */
export const CLIENT_IP_HEADER = 'x-postwright-client-ip';

/**
 * Request header in which the start route hands better-auth's `/sign-in/social` endpoint the setup
 * token of a setup sign-in. That endpoint is not reachable from outside (`disabledPaths`), and the
 * setup-intent middleware checks the token again before it marks the flow.
 */
export const SETUP_TOKEN_HEADER = 'x-postwright-setup-token';

/** The dashboard's sign-in page, where failed OAuth sign-ins land with `?error=<code>`. */
export function loginUrl(config: Pick<Config, 'BASE_URL'>): string {
  return `${config.BASE_URL}/login`;
}

/**
 * True for an error better-auth's server API threw (its `APIError`, from better-call or
 * @better-auth/core). The same test as better-auth's own `isAPIError`
 * (@better-auth/core/utils/is-api-error: `instanceof`, or `name === "APIError"`), by name only,
 * so checking an error does not load better-auth.
 */
export function isAPIError(error: unknown): error is APIError {
  return error instanceof Error && error.name === 'APIError';
}
