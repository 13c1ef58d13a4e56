/** The PostgreSQL error (with SQLSTATE `code`) behind a Drizzle wrapper, or undefined. */
function postgresError(error: unknown): { code: string; constraint?: unknown } | undefined {
  for (let e: unknown = error; e && typeof e === 'object'; e = (e as { cause?: unknown }).cause) {
    const code = (e as { code?: unknown }).code;
    if (typeof code === 'string' && /^[0-9A-Z]{5}$/.test(code))
      return e as { code: string; constraint?: unknown };
  }
  return undefined;
}

/** PostgreSQL SQLSTATE 23505 (unique_violation), looked up through Drizzle's error wrapper. */
export function isUniqueViolation(error: unknown, constraint?: string): boolean {
  const pgError = postgresError(error);
  return pgError?.code === '23505' && (constraint === undefined || pgError.constraint === constraint);
}

/** PostgreSQL SQLSTATE 23503 (foreign_key_violation), optionally of `constraint`, through Drizzle's wrapper. */
export function isForeignKeyViolation(error: unknown, constraint?: string): boolean {
  const pgError = postgresError(error);
  return pgError?.code === '23503' && (constraint === undefined || pgError.constraint === constraint);
}

/**
 * A foreign-key violation of a team foreign key, of any table (`<table>_team_id_teams_id_fk`,
 * Drizzle's naming): the team was deleted while the caller's credentials were still cached.
 */
export function isTeamForeignKeyViolation(error: unknown): boolean {
  const pgError = postgresError(error);
  return (
    pgError?.code === '23503' &&
    typeof pgError.constraint === 'string' &&
    pgError.constraint.endsWith('_team_id_teams_id_fk')
  );
}

/** PostgreSQL SQLSTATE 23502 (not_null_violation), through Drizzle's error wrapper. */
export function isNotNullViolation(error: unknown): boolean {
  return postgresError(error)?.code === '23502';
}

/**
 * True for PostgreSQL errors caused by the values a client sent, not by the server: SQLSTATE class
 * 22 "data exception" (a NUL byte or an invalid Unicode escape in text or JSON, a number out of
 * range, …), 54000 "program limit exceeded" (a value too long for its index row) and 54001
 * "statement too complex" (JSON nested thousands deep). PostgreSQL docs,
 * Appendix A "PostgreSQL Error Codes".
 */
export function isClientDataError(error: unknown): boolean {
  const code = postgresError(error)?.code;
  return code !== undefined && (code.startsWith('22') || code === '54000' || code === '54001');
}

/**
 * True when PostgreSQL refused a statement for the data it carried, so the same rows will be
 * refused again: SQLSTATE classes 22 (data exception: a NUL in text, a value out of range), 23
 * (integrity constraint violation) and 54 (program limit exceeded: an index row over 8,191 bytes,
 * JSON nested too deep). Not connection errors, serialization failures or deadlocks, which a
 * retry may get past. PostgreSQL docs, Appendix A "PostgreSQL Error Codes".
 */
export function isRefusedData(error: unknown): boolean {
  const code = postgresError(error)?.code;
  return code !== undefined && (code.startsWith('22') || code.startsWith('23') || code.startsWith('54'));
}

/**
 * A database error without the statement's parameters, for logs: Drizzle puts the bound values
 * (password hashes, recipients, variables) in its message after "params:".
 */
export function withoutQueryParameters(error: unknown): unknown {
  if (!(error instanceof Error) || !error.message.includes('params:')) return error;
  const redacted = new Error(error.message.replace(/params:[\s\S]*$/, 'params: [redacted]'));
  redacted.name = error.name;
  redacted.stack = redacted.message;
  const code = postgresError(error)?.code;
  return code ? Object.assign(redacted, { code }) : redacted;
}

/**
 * The message of `error` for a plain log line (`console.error`): a database error's without its
 * statement's parameters ({@link withoutQueryParameters}: webhook bodies and answers, recipients,
 * tracked links such as password-reset URLs), anything else as `String(error)`.
 */
export function messageForLog(error: unknown): string {
  const redacted = withoutQueryParameters(error);
  return redacted instanceof Error ? redacted.message : String(redacted);
}
