import { describe, expect, it } from 'vitest';
import { toAppError } from './error-handler.ts';

/** A request as toAppError reads it, recording what it logs. */
function request() {
  const logged: string[] = [];
  const log = { error: (_: unknown, message: string) => logged.push(`error ${message}`) } as Record<
    string,
    unknown
  >;
  log.warn = (_: unknown, message: string) => logged.push(`warn ${message}`);
  return { logged, request: { id: 'req-1', log, routeOptions: {} } as never };
}

describe('toAppError: no database connection (review finding, session 18)', () => {
  const refused = Object.assign(new Error('connect ECONNREFUSED 127.0.0.1:5432'), {
    code: 'ECONNREFUSED',
    syscall: 'connect',
  });
  it.each([
    ['the pool’s wait ended', new Error('timeout exceeded when trying to connect')],
    ['a new connection timed out', new Error('Connection terminated due to connection timeout')],
    ['the server refused it (wrapped by Drizzle)', new Error('Failed query: select 1', { cause: refused })],
  ])('is 503 SERVICE_UNAVAILABLE when %s, not a logged 500', (_label, error) => {
    const { logged, request: req } = request();
    const appError = toAppError(error, req);
    expect(appError.code).toBe('SERVICE_UNAVAILABLE');
    expect(appError.details).toEqual({ reason: 'DATABASE_UNAVAILABLE' });
    expect(logged.filter((line) => line.startsWith('error'))).toEqual([]);
  });

  it('still answers 500 for anything else, logged', () => {
    const { logged, request: req } = request();
    expect(toAppError(new Error('boom'), req).code).toBe('INTERNAL_ERROR');
    expect(logged).toEqual(['error unhandled error']);
    // A PostgreSQL error with a SQLSTATE is not a socket error, whatever its code.
    const sqlError = Object.assign(new Error('deadlock detected'), { code: '40P01' });
    expect(toAppError(sqlError, request().request).code).toBe('INTERNAL_ERROR');
  });
});
