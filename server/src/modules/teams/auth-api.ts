import { authErrorToAppError, isAPIError } from '../auth/index.ts';

/**
 * An error thrown by better-auth's server API (`auth.api.*`) as an AppError with our codes (the
 * mapping the auth mount uses: 400 → INVALID_INPUT, 403 → FORBIDDEN, 422 → ALREADY_EXISTS, …;
 * better-auth's own code in `details.reason`); any other error unchanged.
 */
export function fromAuthApiError(error: unknown): unknown {
  if (!isAPIError(error)) return error;
  const body = error.body as { message?: unknown; code?: unknown } | undefined;
  return authErrorToAppError(error.statusCode, body ?? null);
}

/** Runs a call of better-auth's server API, rethrowing its errors through {@link fromAuthApiError}. */
export async function callAuthApi<T>(call: () => Promise<T>): Promise<T> {
  try {
    return await call();
  } catch (error) {
    throw fromAuthApiError(error);
  }
}

/** better-auth's error code (`ORGANIZATION_ALREADY_EXISTS`, …) of an error it threw, or undefined. */
export function authErrorCode(error: unknown): string | undefined {
  if (!isAPIError(error)) return undefined;
  const code = (error.body as { code?: unknown } | undefined)?.code;
  return typeof code === 'string' ? code : undefined;
}
