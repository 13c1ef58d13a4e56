import type { Config } from '../../config.ts';
import { errorForLog } from '../../http/log-redaction.ts';

/** The app logger's methods better-auth's messages are written with (pino's signature). */
export interface AuthLog {
  debug: (details: object, message: string) => void;
  info: (details: object, message: string) => void;
  warn: (details: object, message: string) => void;
  error: (details: object, message: string) => void;
}

type AuthLogLevel = 'error' | 'warn' | 'info' | 'debug';

/** better-auth's level for LOG_LEVEL: it has no trace or fatal; silent turns it off. */
function authLogLevel(level: Config['LOG_LEVEL']): AuthLogLevel | undefined {
  if (level === 'silent') return undefined;
  if (level === 'fatal' || level === 'error') return 'error';
  if (level === 'debug' || level === 'trace') return 'debug';
  return 'warn';
}

/** An error as a plain object (name, message, code, stack), which pino writes out in full. */
function plainError(value: unknown): unknown {
  const error = errorForLog(value);
  if (!(error instanceof Error)) return error;
  const { code } = error as { code?: unknown };
  return { type: error.name, message: error.message, ...(code ? { code } : {}), stack: error.stack };
}

/** A logged argument with its errors (also one level down, `{providerId, error}`) redacted. */
function redactArgument(value: unknown): unknown {
  if (value instanceof Error || value === null || typeof value !== 'object' || Array.isArray(value)) {
    return plainError(value);
  }
  return Object.fromEntries(Object.entries(value).map(([key, inner]) => [key, plainError(inner)]));
}

/**
 * better-auth's `logger` option: at the level LOG_LEVEL maps to, and written to `log` (the app's
 * pino logger) when given, so its messages share the app's destination and format. Errors among
 * the arguments go through `errorForLog` (issue #8: better-auth logs the raw database errors of its
 * queries, whose messages carry the statement parameters: emails, password hashes, tokens).
 */
export function betterAuthLogger(level: Config['LOG_LEVEL'], log?: AuthLog) {
  const authLevel = authLogLevel(level);
  if (!authLevel) return { disabled: true };
  if (!log) return { level: authLevel };
  return {
    level: authLevel,
    log: (messageLevel: AuthLogLevel, message: string, ...args: unknown[]) => {
      const details = args.length > 0 ? { details: args.map(redactArgument) } : {};
      log[messageLevel]({ component: 'better-auth', ...details }, message);
    },
  };
}
