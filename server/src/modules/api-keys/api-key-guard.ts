import type { FastifyReply, FastifyRequest } from 'fastify';
import { AppError } from '../../http/errors.ts';
import type { ApiKeyScope } from './api-keys.schema.ts';
import { authenticateApiKey, recordApiKeyUse } from './api-keys.service.ts';
import { throttleClientOf } from './unknown-key-throttle.ts';

/**
 * onRequest hook for public endpoints (before the body is read): authenticates `X-API-Key` (through
 * the app's key cache: no database read for a key verified in the last 5 s), requires one of `scopes`, then counts
 * the request against the key's per-minute limit, setting `RateLimit-Limit`, `RateLimit-Remaining`,
 * `RateLimit-Reset` (seconds) and, when refused, `Retry-After` (IETF RateLimit header fields draft).
 * A client address that sent UNKNOWN_KEYS_PER_MINUTE unknown keys this minute gets 429 for keys
 * not cached (no database read), with `Retry-After`.
 * @throws UNAUTHORIZED / INVALID_TOKEN / TOKEN_EXPIRED (401), FORBIDDEN (403) for a missing scope,
 *   RATE_LIMITED (429) over the limit (spec case rule 1) or over the unknown-key budget.
 */
export function requireApiKey(...scopes: ApiKeyScope[]) {
  return async function apiKeyGuard(request: FastifyRequest, reply: FastifyReply): Promise<void> {
    const { database, rateLimiter, caches } = request.server.ctx;
    const header = request.headers['x-api-key'];
    const secret = Array.isArray(header) ? header[0] : header;
    const now = new Date();
    const asker = { throttle: caches.unknownApiKeys, client: throttleClientOf(request.ip) };
    // A 429 gets its Retry-After from the error handler (details.retryAfterSeconds).
    const key = await authenticateApiKey(
      database.db,
      caches.apiKeys,
      secret?.trim() || undefined,
      now,
      asker,
    );
    if (!scopes.some((scope) => key.scopes.includes(scope))) {
      throw new AppError('FORBIDDEN', `API key lacks the scope: ${scopes.join(' or ')}`, {
        requiredScopes: scopes,
      });
    }
    const decision = await rateLimiter.consume(key.id, key.rateLimit);
    reply.header('RateLimit-Limit', decision.limit);
    reply.header('RateLimit-Remaining', decision.remaining);
    reply.header('RateLimit-Reset', decision.resetSeconds);
    if (!decision.allowed) {
      throw new AppError('RATE_LIMITED', `Rate limit of ${decision.limit} requests per minute exceeded`, {
        limit: decision.limit,
        retryAfterSeconds: decision.resetSeconds,
      });
    }
    await recordApiKeyUse(database.db, key, now);
    request.principal = { kind: 'apiKey', apiKeyId: key.id, teamId: key.teamId, scopes: key.scopes };
  };
}
