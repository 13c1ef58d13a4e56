import { describe, expect, it } from 'vitest';
import { type AuthLog, betterAuthLogger } from './auth-logger.ts';

/** A pino-like sink that keeps every line as JSON. */
function sink(): { log: AuthLog; lines: string[] } {
  const lines: string[] = [];
  const write = (level: string) => (details: object, message: string) =>
    void lines.push(JSON.stringify({ level, ...details, message }));
  return {
    lines,
    log: { debug: write('debug'), info: write('info'), warn: write('warn'), error: write('error') },
  };
}

describe('betterAuthLogger', () => {
  it('writes better-auth messages to the app logger with the SQL parameters of errors cut off', () => {
    const { log, lines } = sink();
    const logger = betterAuthLogger('info', log);
    expect(logger).toMatchObject({ level: 'warn' });
    const dbError = new Error(
      'Failed query: select * from "users" where "email" = $1\nparams: victim@example.test',
      {
        cause: new Error('params: victim@example.test'),
      },
    );
    logger.log?.('error', 'Better auth was unable to query your database.\nError: ', dbError);
    logger.log?.('error', 'Unable to derive provider account identity', {
      providerId: 'oidc',
      error: dbError,
    });
    expect(lines).toHaveLength(2);
    expect(lines.join('\n')).not.toContain('victim@example.test');
    expect(JSON.parse(lines[0]!)).toMatchObject({
      level: 'error',
      component: 'better-auth',
      details: [{ type: 'Error', message: expect.stringContaining('params: [redacted]') }],
    });
    expect(JSON.parse(lines[1]!).details[0]).toMatchObject({ providerId: 'oidc', error: { type: 'Error' } });
  });

  it('maps LOG_LEVEL onto better-auth levels and turns it off when silent', () => {
    expect(betterAuthLogger('silent')).toEqual({ disabled: true });
    expect(betterAuthLogger('trace')).toEqual({ level: 'debug' });
    expect(betterAuthLogger('fatal')).toEqual({ level: 'error' });
  });
});
