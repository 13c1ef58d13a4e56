/** PostgreSQL SQLSTATE 23505 (unique_violation), looked up through Drizzle's error wrapper. */
export function isUniqueViolation(error: unknown, constraint?: string): boolean {
  for (let e: unknown = error; e && typeof e === 'object'; e = (e as { cause?: unknown }).cause) {
    const pgError = e as { code?: unknown; constraint?: unknown };
    if (pgError.code === '23505') return constraint === undefined || pgError.constraint === constraint;
  }
  return false;
}
