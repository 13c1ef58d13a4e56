import { fromNodeHeaders } from 'better-auth/node';
import type { FastifyRequest } from 'fastify';
import { AppError } from '../../http/errors.ts';
import { CLIENT_IP_HEADER, isAPIError } from './auth-light.ts';

/**
 * The request's headers for a better-auth server API call, with the real client IP in our own
 * header (better-auth reads the IP from headers only; a client-sent X-Forwarded-For is not trusted).
 */
export function authHeaders(request: FastifyRequest): Headers {
  const headers = fromNodeHeaders(request.headers);
  headers.set(CLIENT_IP_HEADER, request.ip);
  return headers;
}

/**
 * Cookie requests that change state must come from our own origin (`Origin` = BASE_URL's origin):
 * browsers attach cookies to cross-site requests but never forge Origin (CSRF defence).
 * @throws FORBIDDEN (403, details.reason INVALID_ORIGIN).
 */
export function assertSameOrigin(request: FastifyRequest): void {
  if (request.headers.origin !== new URL(request.server.ctx.config.BASE_URL).origin) {
    throw new AppError('FORBIDDEN', 'Cross-origin request refused', { reason: 'INVALID_ORIGIN' });
  }
}

/** The signed-in user behind the request's session cookie, or null (no, expired or revoked session). */
export async function signedInUser(
  request: FastifyRequest,
): Promise<{ userId: string; email: string } | null> {
  try {
    const session = await request.server.ctx.auth.api.getSession({ headers: authHeaders(request) });
    return session ? { userId: session.user.id, email: session.user.email } : null;
  } catch (error) {
    if (isAPIError(error)) return null;
    throw error;
  }
}
