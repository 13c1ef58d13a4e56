/**
 * The one place where error codes meet HTTP statuses (spec: "Errors" table).
 * Services throw {@link AppError}; the error handler renders the envelope.
 */
export const ERROR_STATUS = {
  UNAUTHORIZED: 401,
  FORBIDDEN: 403,
  INVALID_TOKEN: 401,
  TOKEN_EXPIRED: 401,
  VALIDATION_ERROR: 400,
  INVALID_INPUT: 400,
  NOT_FOUND: 404,
  ALREADY_EXISTS: 409,
  CONFLICT: 409,
  RATE_LIMITED: 429,
  INTERNAL_ERROR: 500,
  SERVICE_UNAVAILABLE: 503,
  SEND_FAILED: 500,
  INVALID_TEMPLATE: 400,
  ADAPTER_ERROR: 500,
  S3_NOT_CONFIGURED: 500,
  INVALID_FILE_TYPE: 400,
  FILE_TOO_LARGE: 400,
  PDF_NOT_CONFIGURED: 500,
  PDF_GENERATION_FAILED: 500,
} as const;

export type ErrorCode = keyof typeof ERROR_STATUS;

/** An error with a spec code; `details` lands in the envelope's `error.details`. */
export class AppError extends Error {
  readonly code: ErrorCode;
  readonly details: Record<string, unknown>;

  constructor(code: ErrorCode, message: string, details: Record<string, unknown> = {}) {
    super(message);
    this.name = 'AppError';
    this.code = code;
    this.details = details;
  }

  /** HTTP status for this error's code, from {@link ERROR_STATUS}. */
  get statusCode(): number {
    return ERROR_STATUS[this.code];
  }
}

/** 404 NOT_FOUND for a resource the caller's team does not own or that does not exist. */
export function notFound(resource: string): AppError {
  return new AppError('NOT_FOUND', `${resource} not found`);
}

/** One validation issue as reported in `details.issues` (path joined with dots). */
export interface ValidationIssue {
  path: string;
  message: string;
}

/**
 * `issues` without those at the path of a type error ("expected string, received array"), the
 * type errors kept, order kept. zod 4 still runs a field's checks on a value of another type, so
 * `"name": []` also said "Too small: expected array to have >=1 items", as if an array were wanted
 * (review finding, session 22). `isTypeError` tells zod's `invalid_type` issues.
 */
export function withoutChecksAfterTypeErrors<T extends ValidationIssue>(
  issues: readonly T[],
  isTypeError: (issue: T) => boolean,
): T[] {
  const mistyped = new Set(issues.filter(isTypeError).map((issue) => issue.path));
  return issues.filter((issue) => isTypeError(issue) || !mistyped.has(issue.path));
}

/** 400 VALIDATION_ERROR with `details.issues = [{path, message}]`. */
export function validationError(issues: ValidationIssue[], message = 'Request validation failed'): AppError {
  return new AppError('VALIDATION_ERROR', message, { issues });
}
