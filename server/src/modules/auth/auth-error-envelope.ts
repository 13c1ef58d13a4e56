import { AppError, type ErrorCode } from '../../http/errors.ts';

/** better-auth's (better-call's) error body. */
interface BetterAuthErrorBody {
  message?: unknown;
  code?: unknown;
}

const DEFAULT_MESSAGES: Partial<Record<ErrorCode, string>> = {
  UNAUTHORIZED: 'Authentication required',
  FORBIDDEN: 'Forbidden',
  NOT_FOUND: 'Not found',
  RATE_LIMITED: 'Too many requests. Please try again later.',
  VALIDATION_ERROR: 'Request validation failed',
  INVALID_INPUT: 'Invalid input',
  CONFLICT: 'Conflict with existing resource',
  ALREADY_EXISTS: 'Resource already exists',
};

function codeFor(status: number, reason: string | undefined): ErrorCode {
  switch (status) {
    case 400:
      return reason === 'VALIDATION_ERROR' ? 'VALIDATION_ERROR' : 'INVALID_INPUT';
    case 401:
      return 'UNAUTHORIZED';
    case 403:
      return 'FORBIDDEN';
    case 404:
      return 'NOT_FOUND';
    case 409:
      return 'CONFLICT';
    // better-auth answers 422 for e.g. USER_ALREADY_EXISTS and *_ALREADY_EXISTS in the organization plugin.
    case 422:
      return reason?.includes('ALREADY_EXISTS') ? 'ALREADY_EXISTS' : 'INVALID_INPUT';
    case 429:
      return 'RATE_LIMITED';
    case 503:
      return 'SERVICE_UNAVAILABLE';
    default:
      return status >= 500 ? 'INTERNAL_ERROR' : 'INVALID_INPUT';
  }
}

/**
 * Translates one of better-auth's error responses (`{message, code}` with an HTTP status) into
 * an {@link AppError} with the spec's codes ("Errors" table): 400 → VALIDATION_ERROR (its
 * body validation) or INVALID_INPUT, 401 → UNAUTHORIZED, 403 → FORBIDDEN, 404 → NOT_FOUND,
 * 409 → CONFLICT, 422 → ALREADY_EXISTS or INVALID_INPUT, 429 → RATE_LIMITED, 5xx →
 * INTERNAL_ERROR/SERVICE_UNAVAILABLE (message hidden). `details.reason` keeps better-auth's own
 * code (e.g. `INVALID_EMAIL_OR_PASSWORD`); a 429 adds `details.retryAfter` (seconds).
 */
export function authErrorToAppError(
  status: number,
  body: BetterAuthErrorBody | null,
  retryAfter?: number,
): AppError {
  const reason = typeof body?.code === 'string' && body.code ? body.code : undefined;
  const code = codeFor(status, reason);
  const details: Record<string, unknown> = {};
  if (reason && code !== 'INTERNAL_ERROR') details.reason = reason;
  if (code === 'RATE_LIMITED' && retryAfter !== undefined && Number.isFinite(retryAfter)) {
    details.retryAfter = retryAfter;
  }
  const message =
    code !== 'INTERNAL_ERROR' && typeof body?.message === 'string' && body.message
      ? body.message
      : (DEFAULT_MESSAGES[code] ?? 'Internal server error');
  return new AppError(code, message, details);
}

/** The spec's error envelope as a Fetch Response (status from the code table). */
export function envelopeResponse(error: AppError, headers: Headers = new Headers()): Response {
  headers.delete('content-length');
  headers.set('content-type', 'application/json; charset=utf-8');
  const body = {
    success: false,
    error: { code: error.code, message: error.message, details: error.details },
  };
  return new Response(JSON.stringify(body), { status: error.statusCode, headers });
}

/**
 * Passes successful and redirect responses through untouched and re-renders an error response
 * of better-auth (status ≥ 400) in our envelope, keeping its other headers (Set-Cookie that
 * clears a stale session, X-Retry-After).
 */
export async function presentAuthResponse(response: Response): Promise<Response> {
  if (response.status < 400) return response;
  let body: BetterAuthErrorBody | null = null;
  try {
    const text = await response.text();
    const parsed: unknown = text ? JSON.parse(text) : null;
    if (parsed && typeof parsed === 'object') body = parsed as BetterAuthErrorBody;
  } catch {
    body = null;
  }
  const retryAfterHeader = response.headers.get('x-retry-after');
  const retryAfter = retryAfterHeader === null ? undefined : Number(retryAfterHeader);
  const headers = new Headers(response.headers);
  if (retryAfter !== undefined && Number.isFinite(retryAfter)) headers.set('retry-after', String(retryAfter));
  return envelopeResponse(authErrorToAppError(response.status, body, retryAfter), headers);
}

/**
 * An OAuth callback (`/api/auth/callback/:provider`) that failed redirects to the sign-in page
 * `loginUrl?error=<code>&error_description=…` (better-auth's `onAPIError.errorURL`). Browsers keep
 * that redirect; API callers, whose `Accept` names `application/json` but not `text/html`, get 403
 * FORBIDDEN in our envelope instead, with `details.reason = <code>` (e.g. `invitation_required`,
 * `account_not_linked`, `state_mismatch`). Other headers (cookies that clear the state) are kept.
 */
export function presentOAuthCallbackFailure(
  request: Request,
  response: Response,
  loginUrl: string,
): Response {
  if (response.status !== 302 || !new URL(request.url).pathname.startsWith('/api/auth/callback/')) {
    return response;
  }
  const accept = request.headers.get('accept') ?? '';
  if (!accept.includes('application/json') || accept.includes('text/html')) return response;
  const location = response.headers.get('location');
  if (!location?.startsWith(`${loginUrl}?`)) return response;
  const query = new URL(location).searchParams;
  const reason = query.get('error');
  if (!reason) return response;
  const headers = new Headers(response.headers);
  headers.delete('location');
  const message = query.get('error_description') || 'Sign-in refused';
  return envelopeResponse(new AppError('FORBIDDEN', message, { reason }), headers);
}
