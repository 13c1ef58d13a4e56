import { z } from 'zod';

/**
 * Every environment variable Postwright reads, parsed once with zod.
 * The README's configuration table mirrors this schema: keep them in step.
 */
const booleanFromEnv = z.enum(['true', 'false', '1', '0']).transform((v) => v === 'true' || v === '1');

const envSchema = z.object({
  PORT: z.coerce.number().int().min(0).max(65535).default(3000),
  HOST: z.string().min(1).default('0.0.0.0'),
  BASE_URL: z.url().optional(),
  DATA_DIR: z.string().min(1).default('./data'),
  DATABASE_URL: z
    .string()
    .regex(/^postgres(ql)?:\/\//, 'must be a postgres:// or postgresql:// URL')
    .optional(),
  ENCRYPTION_KEY: z
    .string()
    .refine((v) => Buffer.from(v, 'base64').length === 32, 'must be 32 bytes, base64-encoded')
    .optional(),
  SETUP_TOKEN: z.string().min(16, 'must be at least 16 characters').optional(),
  LOG_LEVEL: z.enum(['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent']).default('info'),
  REDIS_URL: z
    .string()
    .regex(/^rediss?:\/\//, 'must be a redis:// or rediss:// URL')
    .optional(),
  WORKER_CONCURRENCY: z.coerce.number().int().min(1).max(100).default(4),
  SEND_RETRY_LIMIT: z.coerce.number().int().min(0).max(20).default(5),
  SEND_RETRY_DELAY_SECONDS: z.coerce.number().int().min(1).max(3600).default(30),
  TRUST_PROXY: booleanFromEnv.default(false),
});

/** The parsed configuration: env values with defaults applied and BASE_URL resolved. */
export type Config = Omit<z.output<typeof envSchema>, 'BASE_URL'> & { BASE_URL: string };

/** The process roles `postwright start --role` accepts. */
export type Role = 'all' | 'api' | 'worker';

/** Thrown for an invalid environment; its message is one line naming the variable. */
export class ConfigError extends Error {}

/**
 * Parses the environment into a {@link Config}.
 * BASE_URL defaults to `http://localhost:<PORT>`; a trailing slash is removed.
 * @throws ConfigError with a one-line message naming the first bad variable.
 */
export function loadConfig(env: NodeJS.ProcessEnv = process.env): Config {
  const cleaned = Object.fromEntries(
    Object.keys(envSchema.shape).flatMap((name) => {
      const value = env[name];
      return value === undefined || value === '' ? [] : [[name, value]];
    }),
  );
  const parsed = envSchema.safeParse(cleaned);
  if (!parsed.success) {
    const issue = parsed.error.issues[0];
    const name = String(issue?.path[0] ?? 'environment');
    throw new ConfigError(`Invalid ${name}: ${issue?.message ?? 'invalid value'}`);
  }
  const { BASE_URL, ...rest } = parsed.data;
  const baseUrl = (BASE_URL ?? `http://localhost:${rest.PORT}`).replace(/\/+$/, '');
  if (rest.DATABASE_URL && !rest.ENCRYPTION_KEY) {
    throw new ConfigError(
      'Invalid ENCRYPTION_KEY: required when DATABASE_URL is set (32 bytes, base64; e.g. `openssl rand -base64 32`)',
    );
  }
  return { ...rest, BASE_URL: baseUrl };
}
