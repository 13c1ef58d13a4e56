export { type ApiKeyCache, createApiKeyCache } from './api-key-cache.ts';
export { requireApiKey } from './api-key-guard.ts';
export { apiKeyRoutes } from './api-keys.routes.ts';
export { API_KEY_SCOPES, type ApiKeyScope } from './api-keys.schema.ts';
export {
  createRateLimiter,
  type RateLimitDecision,
  type RateLimiter,
  type RateLimitLog,
} from './rate-limit.ts';
export { createUnknownKeyThrottle, type UnknownKeyThrottle } from './unknown-key-throttle.ts';
