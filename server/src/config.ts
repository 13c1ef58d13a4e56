import { isIP } from 'node:net';
import { z } from 'zod';
import { isHostOrAddress } from './host-name.ts';
import { trustProxySchema } from './http/trust-proxy.ts';

/**
 * Every environment variable Postwright reads, parsed once with zod.
 * The README's configuration table mirrors this schema: keep them in step.
 */
const booleanFromEnv = z.enum(['true', 'false', '1', '0']).transform((v) => v === 'true' || v === '1');

/**
 * An OpenID Connect issuer must be https (OpenID Connect Discovery 1.0 §3); plain http is accepted
 * for loopback hosts only, so tests and local development can run an identity provider on 127.0.0.1.
 */
function isAcceptableIssuer(value: string): boolean {
  // zod runs a refine even after `.url()` failed: an unparsable value is refused here, not thrown.
  const url = URL.parse(value);
  if (!url) return false;
  if (url.protocol === 'https:') return true;
  return url.protocol === 'http:' && ['localhost', '127.0.0.1', '[::1]'].includes(url.hostname);
}

/**
 * Whether the user name and password of `value` (a URL) are well-formed percent-encoding: the PDF
 * client decodes them into its Basic credentials, and `%zz` failed there after start-up, with a
 * stack trace (review finding, session 15).
 */
function hasDecodableCredentials(value: string): boolean {
  const url = URL.parse(value);
  if (!url) return false;
  try {
    decodeURIComponent(url.username);
    decodeURIComponent(url.password);
    return true;
  } catch {
    return false;
  }
}

/**
 * HOST: an IPv4 or IPv6 literal (without brackets) or a host name. Anything else reached `listen`
 * and failed there with a stack trace (review finding, session 18).
 */
const hostSchema = z
  .string()
  .refine(isHostOrAddress, 'must be an IP address (e.g. 0.0.0.0, ::) or a host name');

/**
 * PORT: decimal digits only, 0-65535. Number() took ' ' for 0 (any free port, the error then
 * named BASE_URL) and '0x50' for 80 (review finding, session 18).
 */
const portSchema = z
  .string()
  .regex(/^\d{1,5}$/, 'must be a whole number from 0 to 65535')
  .transform(Number)
  .pipe(z.number().max(65535, 'must be a whole number from 0 to 65535'));

/**
 * BASE_URL: an http(s) URL without query or fragment (links are made as `${BASE_URL}/setup?token=…`).
 * `z.url()` alone took any scheme: `postwright.example.com:3000` (scheme `postwright.example.com:`)
 * started, then every sign-in answered 500 (review finding, session 18).
 */
const baseUrlSchema = z
  .url({ protocol: /^https?$/, error: 'must be an http:// or https:// URL (e.g. https://mail.example.com)' })
  .refine((value) => !/[?#]/.test(value), 'must not have a query (?) or a fragment (#)');

/** A PROVIDER_ENDPOINT_* base URL: http(s) only (issue #10). */
const providerEndpoint = z
  .url({ protocol: /^https?$/, error: 'must be an http:// or https:// URL' })
  .optional();

/**
 * LOG_RETENTION_DAYS: whole days, 1-36500 (100 years). Unset (or empty) keeps email logs and webhook
 * delivery records for ever, the default (review finding "growth": nothing ever removed them).
 */
const retentionDaysSchema = z
  .string()
  .regex(/^\d{1,5}$/, 'must be a whole number of days from 1 to 36500')
  .transform(Number)
  .pipe(
    z
      .number()
      .min(1, 'must be a whole number of days from 1 to 36500')
      .max(36500, 'must be a whole number of days from 1 to 36500'),
  );

/**
 * One PDF_ALLOWED_IMAGE_HOSTS entry reduced to the host name the renderers compare with an image
 * URL's `hostname` (chromium-pool.ts) and name in the pages' Content-Security-Policy
 * (render-policy.ts): a URL gives its host name, `host:port` its host (any port is allowed anyway).
 * A URL or `host:port` was kept as written and matched no image, so every image was blocked with
 * no start-up message (review finding, newuser 4).
 * @returns the host name or address, or `{ problem }` (a phrase for the one-line config error)
 *   when the entry is not a host name or an IPv4 address, or is one no Content-Security-Policy can
 *   name: an IPv6 address or a name with `_` (CSP Level 3 §2.3.1 host-char; Chromium ignores such
 *   a source, measured), so no image would load from it.
 */
function imageHostOf(entry: string): string | { problem: string } {
  let host = entry;
  if (entry.includes('://')) host = URL.parse(entry)?.hostname ?? entry;
  else if (isIP(entry) === 0) host = /^(.+):\d{1,5}$/.exec(entry)?.[1] ?? entry;
  // A final dot (the DNS root) never matches: images' URL.hostname has none (review, session 19).
  host = host.replace(/^\[(.*)\]$/, '$1').replace(/\.$/, '');
  if (!isHostOrAddress(host)) return { problem: 'is not a host name, an IPv4 address or a URL' };
  if (isIP(host) === 6) {
    return {
      problem:
        "is an IPv6 address, which the renderers' Content-Security-Policy cannot name: use a host name",
    };
  }
  if (host.includes('_')) {
    return {
      problem:
        'has "_", which the renderers\' Content-Security-Policy cannot name: use a host name without it',
    };
  }
  return host;
}

/** PDF_ALLOWED_IMAGE_HOSTS: comma-separated entries, each reduced by {@link imageHostOf}. */
const imageHostsSchema = z.string().transform((value, ctx) => {
  const hosts: string[] = [];
  for (const entry of value.split(',').map((item) => item.trim().toLowerCase())) {
    if (!entry) continue;
    const host = imageHostOf(entry);
    if (typeof host === 'string') {
      hosts.push(host);
      continue;
    }
    ctx.addIssue({
      code: 'custom',
      message: `${JSON.stringify(entry)} ${host.problem} (e.g. images.example.com)`,
    });
    return z.NEVER;
  }
  return hosts;
});

const envSchema = z.object({
  PORT: portSchema.default(3000),
  HOST: hostSchema.default('0.0.0.0'),
  BASE_URL: baseUrlSchema.optional(),
  DATA_DIR: z.string().min(1).default('./data'),
  DATABASE_URL: z
    .string()
    .regex(/^postgres(ql)?:\/\//, 'must be a postgres:// or postgresql:// URL')
    .refine(
      (value) => URL.canParse(value),
      'must be a valid URL (host, port 0-65535, percent-encoded password)',
    )
    .optional(),
  ENCRYPTION_KEY: z
    .string()
    .refine((v) => Buffer.from(v, 'base64').length === 32, 'must be 32 bytes, base64-encoded')
    .optional(),
  // What start-up does when the key cannot be the one the database was written with
  // (encryption-key.ts): `refuse` to start, or `warn` and start (on the embedded default, a missing
  // encryption.key next to a database is then replaced by a new key): the way out for an operator
  // whose key is lost (README "ENCRYPTION_KEY").
  ENCRYPTION_KEY_CHECK: z.enum(['refuse', 'warn'], { error: 'must be refuse or warn' }).default('refuse'),
  SETUP_TOKEN: z.string().min(16, 'must be at least 16 characters').optional(),
  LOG_LEVEL: z.enum(['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent']).default('info'),
  REDIS_URL: z
    .string()
    .regex(/^rediss?:\/\//, 'must be a redis:// or rediss:// URL')
    .optional(),
  // Delivery (issues #8, #9): emails in flight per worker process, SMTP connections (= concurrent
  // sends) per adapter per worker process, and the overall deadline of one send. 20 connections
  // (a team cap of 80 in flight) keep a worker's fetches and group commits large enough that
  // PostgreSQL's share per email halves against 10 (scripts/bench-send.ts).
  WORKER_CONCURRENCY: z.coerce.number().int().min(1).max(2000).default(200),
  ADAPTER_MAX_CONNECTIONS: z.coerce.number().int().min(1).max(100).default(20),
  SEND_TIMEOUT_SECONDS: z.coerce.number().int().min(1).max(600).default(60),
  SEND_RETRY_LIMIT: z.coerce.number().int().min(0).max(20).default(5),
  SEND_RETRY_DELAY_SECONDS: z.coerce.number().int().min(1).max(3600).default(30),
  // Size limits of a send's or preview's `variables` (issue #8); read by modules/rendering.
  SEND_VARIABLES_MAX_BYTES: z.coerce
    .number()
    .int()
    .min(1024)
    .max(10 * 1024 * 1024)
    .default(256 * 1024),
  SEND_VARIABLES_MAX_ARRAY_LENGTH: z.coerce.number().int().min(1).max(1_000_000).default(10_000),
  // Hop count or proxy addresses/CIDRs; `true` is refused (http/trust-proxy.ts, issue #8).
  TRUST_PROXY: trustProxySchema.default(false),
  // Outbound connections (SMTP adapters) may reach loopback/private addresses (issue #8); metadata never.
  SMTP_ALLOW_PRIVATE: booleanFromEnv.default(false),
  // Outbound webhooks (issue #11): delays in seconds before attempt 2, 3, … (so attempts = 1 + the
  // list's length), the answer deadline of one attempt, and whether receivers may be non-public.
  WEBHOOK_RETRY_SCHEDULE: z
    .string()
    .regex(/^\d+(,\d+)*$/, 'must be comma-separated whole seconds, e.g. 5,300,1800')
    .transform((v) => v.split(',').map(Number))
    .refine(
      (list) => list.length <= 50 && list.every((s) => s <= 7 * 24 * 3600),
      'at most 50 delays of at most 7 days',
    )
    .default([5, 300, 1800, 7200, 18000, 36000, 36000]),
  WEBHOOK_TIMEOUT_SECONDS: z.coerce.number().int().min(1).max(300).default(30),
  WEBHOOKS_ALLOW_PRIVATE: booleanFromEnv.default(false),
  // Operator-only base URLs of the hosted email APIs (issue #10), e.g. a regional or test endpoint;
  // trusted configuration: connections to them skip the outbound policy. Unset = the public API.
  PROVIDER_ENDPOINT_RESEND: providerEndpoint,
  PROVIDER_ENDPOINT_SENDGRID: providerEndpoint,
  PROVIDER_ENDPOINT_MAILGUN: providerEndpoint,
  PROVIDER_ENDPOINT_SES: providerEndpoint,
  PROVIDER_ENDPOINT_POSTMARK: providerEndpoint,
  // Operator-only (issue #11): the origin that SNS signing certificates and SubscribeURLs may come
  // from instead of https://sns.<region>.amazonaws.com (a test or private endpoint). Unset = AWS only.
  PROVIDER_EVENTS_SNS_ENDPOINT: providerEndpoint,
  // Sign-in methods (issue #3). Each provider is enabled by its complete set of variables.
  AUTH_PASSWORD: booleanFromEnv.default(true),
  GITHUB_CLIENT_ID: z.string().min(1).optional(),
  GITHUB_CLIENT_SECRET: z.string().min(1).optional(),
  GOOGLE_CLIENT_ID: z.string().min(1).optional(),
  GOOGLE_CLIENT_SECRET: z.string().min(1).optional(),
  OIDC_ISSUER: z
    .url()
    .refine(isAcceptableIssuer, 'must be an https:// URL (http:// only on localhost/127.0.0.1)')
    .optional(),
  OIDC_CLIENT_ID: z.string().min(1).optional(),
  OIDC_CLIENT_SECRET: z.string().min(1).optional(),
  OIDC_NAME: z.string().trim().min(1).max(60).default('Single sign-on'),
  // File storage (uploads): local disk under DATA_DIR/files, or S3. Read by modules/storage.
  STORAGE: z.enum(['local', 's3']).optional(),
  S3_BUCKET: z.string().min(1).optional(),
  S3_REGION: z.string().min(1).default('us-east-1'),
  S3_ENDPOINT: z.url().optional(),
  S3_ACCESS_KEY_ID: z.string().min(1).optional(),
  S3_SECRET_ACCESS_KEY: z.string().min(1).optional(),
  S3_FORCE_PATH_STYLE: booleanFromEnv.optional(),
  S3_PUBLIC_URL: z.url().optional(),
  // PDF attachments and template thumbnails (issue #12). A Gotenberg-compatible renderer; unset, the
  // all-in-one `postwright start` runs the bundled one in-process when Chromium is at CHROMIUM_PATH.
  PDF_RENDERER_URL: z
    .url({ protocol: /^https?$/, error: 'must be an http:// or https:// URL' })
    .refine(hasDecodableCredentials, 'its user name and password must be percent-encoded (e.g. %40 for @)')
    .optional(),
  // `postwright pdf-renderer`: the HTTP Basic credentials it requires (both or neither; needed when
  // HOST is not a loopback address).
  PDF_RENDERER_USERNAME: z
    .string()
    .min(1)
    .refine((v) => !v.includes(':'), 'must not contain ":" (HTTP Basic, RFC 7617)')
    .optional(),
  PDF_RENDERER_PASSWORD: z.string().min(1).optional(),
  CHROMIUM_PATH: z.string().min(1).default('/usr/bin/chromium'),
  PDF_PAPER_SIZE: z.enum(['A4', 'Letter']).default('A4'),
  PDF_MARGIN_MM: z.coerce.number().min(0).max(50).default(15),
  // Deadline of one render (the bundled renderer's per-page timeout; the client waits 5 s longer).
  PDF_RENDER_TIMEOUT_SECONDS: z.coerce.number().min(0.001).max(300).default(30),
  // Bundled renderer: pages rendering at once (one browser), and hosts its pages may load images from.
  PDF_RENDERER_PAGES: z.coerce.number().int().min(1).max(32).default(2),
  PDF_ALLOWED_IMAGE_HOSTS: imageHostsSchema.default([]),
  UPLOAD_MAX_BYTES: z.coerce
    .number()
    .int()
    .min(1)
    .max(100 * 1024 * 1024)
    .default(5 * 1024 * 1024),
  // Per team: bytes and number of uploaded images kept at once (FILE_TOO_LARGE beyond, reason
  // UPLOAD_QUOTA_EXCEEDED); uploads share the disk with the embedded PostgreSQL.
  UPLOAD_TEAM_QUOTA_BYTES: z.coerce
    .number()
    .int()
    .min(1)
    .max(Number.MAX_SAFE_INTEGER)
    .default(1024 * 1024 * 1024),
  UPLOAD_TEAM_MAX_FILES: z.coerce.number().int().min(1).max(10_000_000).default(10_000),
  // Data retention (modules/maintenance): email logs (not `queued`) and webhook delivery records
  // older than this many days are deleted by the workers' maintenance loop. Unset = kept for ever.
  LOG_RETENTION_DAYS: retentionDaysSchema.optional(),
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
  if (rest.PORT === 0 && !BASE_URL) {
    // The address is known only once the server listens, after the links and the sign-in origin
    // are made from BASE_URL: they said http://localhost:0 (review finding, session 15).
    throw new ConfigError('Invalid BASE_URL: required when PORT is 0 (any free port)');
  }
  const baseUrl = (BASE_URL ?? `http://localhost:${rest.PORT}`).replace(/\/+$/, '');
  if (rest.DATABASE_URL && !rest.ENCRYPTION_KEY) {
    throw new ConfigError(
      'Invalid ENCRYPTION_KEY: required when DATABASE_URL is set (32 bytes, base64; e.g. `openssl rand -base64 32`)',
    );
  }
  checkSignInMethods(rest);
  if ((rest.PDF_RENDERER_USERNAME === undefined) !== (rest.PDF_RENDERER_PASSWORD === undefined)) {
    const [missing, present] =
      rest.PDF_RENDERER_USERNAME === undefined
        ? ['PDF_RENDERER_USERNAME', 'PDF_RENDERER_PASSWORD']
        : ['PDF_RENDERER_PASSWORD', 'PDF_RENDERER_USERNAME'];
    throw new ConfigError(`Invalid ${missing}: required when ${present} is set`);
  }
  return { ...rest, BASE_URL: baseUrl };
}

/** Variables that enable one sign-in provider only together: all of them or none. */
const PROVIDER_VARIABLE_SETS = [
  ['GITHUB_CLIENT_ID', 'GITHUB_CLIENT_SECRET'],
  ['GOOGLE_CLIENT_ID', 'GOOGLE_CLIENT_SECRET'],
  ['OIDC_ISSUER', 'OIDC_CLIENT_ID', 'OIDC_CLIENT_SECRET'],
] as const;

/**
 * Cross-variable rules of the sign-in methods (issue #3): a provider's variables come as a complete
 * set (a client id without its secret names the missing variable), and AUTH_PASSWORD=false needs at
 * least one provider, or nobody could sign in.
 * @throws ConfigError naming the missing variable.
 */
function checkSignInMethods(config: Omit<z.output<typeof envSchema>, 'BASE_URL'>): void {
  let providers = 0;
  for (const names of PROVIDER_VARIABLE_SETS) {
    const missing = names.filter((name) => config[name] === undefined);
    if (missing.length === names.length) continue;
    if (missing.length > 0) {
      const present = names.filter((name) => !missing.includes(name)).join(', ');
      throw new ConfigError(`Invalid ${missing[0]}: required when ${present} is set`);
    }
    providers++;
  }
  if (!config.AUTH_PASSWORD && providers === 0) {
    throw new ConfigError(
      'Invalid AUTH_PASSWORD: false needs a sign-in provider (GITHUB_*, GOOGLE_* or OIDC_* variables)',
    );
  }
}
