#!/usr/bin/env node
import path from 'node:path';
import { parseArgs } from 'node:util';
import ipaddr from 'ipaddr.js';
import pg from 'pg';
import { type Config, ConfigError, loadConfig, type Role } from './config.ts';
import {
  migrateDatabase,
  openDatabase,
  POOL_CONNECTION_TIMEOUT_MS,
  SchemaNewerThanReleaseError,
} from './db/client.ts';
import { EmbeddedPostgresError } from './db/embedded-postgres.ts';
import { trimHeapAfterStart } from './heap-trim.ts';
import type { DeletedTeam } from './modules/teams/index.ts';
import { reexecWithStartEnvironment } from './start-environment.ts';

const USAGE = `Usage: postwright <command> [options]

Commands:
  start [--role all|api|worker]   Serve the dashboard, the API, /docs and the workers (default role: all)
  migrate                         Apply database migrations and exit
  delete-user <email>             Delete that account (sessions, memberships, invitations it sent)
                                  and the teams it is the only member of, with all they hold; refused
                                  for the only owner of a team with other members. Run it with the
                                  server's storage settings; stop an embedded-database server first
  pdf-renderer                    Serve the bundled Gotenberg-compatible PDF renderer on HOST:PORT
                                  (Chromium at CHROMIUM_PATH; no database needed)
  help                            Show this help

Configuration comes from environment variables; see README.md.`;

async function main(argv: string[]): Promise<number> {
  const { positionals, values } = parseArgs({
    args: argv,
    allowPositionals: true,
    options: { role: { type: 'string', default: 'all' }, help: { type: 'boolean', short: 'h' } },
  });
  const command = positionals[0] ?? 'start';
  if (values.help || command === 'help') {
    console.log(USAGE);
    return 0;
  }
  // Idle memory (issue #9): the compile cache and malloc settings need a restart of node to apply.
  if (command === 'start') reexecWithStartEnvironment();
  const config = loadConfig();
  try {
    return await runCommand(command, values.role ?? 'all', positionals, config);
  } catch (error) {
    const message = startupFailureMessage(error, config);
    throw message === undefined ? error : new StartupError(message, { cause: error });
  }
}

/** Runs `command` once the configuration is loaded; returns the exit code. */
async function runCommand(command: string, role: string, positionals: string[], config: Config) {
  if (command === 'migrate') {
    const database = await openDatabase({ databaseUrl: config.DATABASE_URL, dataDir: config.DATA_DIR });
    try {
      // A database newer than this release throws (one line, exit code 1; see startupFailureMessage).
      await migrateDatabase(database);
    } finally {
      await database.close();
    }
    console.log('Migrations applied.');
    return 0;
  }
  if (command === 'delete-user') return deleteUser(config, positionals[1]);
  if (command === 'pdf-renderer') return servePdfRenderer(config);
  if (command !== 'start') {
    console.error(`Unknown command "${command}".\n\n${USAGE}`);
    return 2;
  }
  if (!['all', 'api', 'worker'].includes(role)) {
    console.error(`Invalid --role "${role}": expected all, api or worker.`);
    return 2;
  }
  return serve(config, role as Role);
}

/**
 * `postwright start`: runs the role until SIGINT/SIGTERM, then stops the workers, the API, the
 * pools and last the embedded PostgreSQL (it runs in its own session, so a terminal's Ctrl-C
 * reached only us). The signals are caught before start-up: one that arrives while the embedded
 * PostgreSQL starts or migrations run lets start-up finish (or fail), then stops everything and
 * exits 0. Before, Node's default action killed the process at once and left the embedded
 * PostgreSQL running (review finding, session 18). A second signal exits at once (130); the
 * embedded server is still told to stop on exit.
 * @returns 0 after a stop; a start-up failure without a stop signal is thrown.
 */
async function serve(config: Config, role: Role): Promise<number> {
  let stopRequested = false;
  const stopSignal = new Promise<NodeJS.Signals>((resolve) => {
    const onSignal = (signal: NodeJS.Signals) => {
      if (stopRequested) process.exit(130);
      stopRequested = true;
      resolve(signal);
    };
    process.on('SIGINT', onSignal);
    process.on('SIGTERM', onSignal);
  });
  if (role !== 'all' && !config.DATABASE_URL) {
    console.warn('Running one role on the embedded database: only one process can open DATA_DIR at a time.');
  }
  // A server runs React's production build unless told otherwise (it renders about twice as fast
  // as the development build). React reads NODE_ENV when first loaded, hence the late import.
  process.env.NODE_ENV ??= 'production';
  const { startPostwright } = await import('./runtime.ts');
  let running: Awaited<ReturnType<typeof startPostwright>>;
  try {
    running = await startPostwright(config, role);
  } catch (error) {
    if (!stopRequested) throw error;
    // Asked to stop anyway. startPostwright closes what it opened when migrations or the context
    // fail; after a failed listen, the embedded server is told to stop as this process exits.
    console.error(`Start-up failed while stopping: ${startupFailureMessage(error, config) ?? String(error)}`);
    return 0;
  }
  if (stopRequested) console.log('Stopping: a stop signal arrived during start-up.');
  else {
    if (running.url)
      console.log(
        `Postwright (${role}) listening on ${running.url} — dashboard at ${config.BASE_URL}/, API docs at ${config.BASE_URL}/docs`,
      );
    else console.log(`Postwright worker started.`);
    // Start-up's garbage and grown young generation stay committed while idle otherwise (issue #9).
    trimHeapAfterStart();
  }
  const stoppedDuringStartup = stopRequested;
  const signal = await stopSignal;
  // A stop is told in the log, so one the operator did not ask for shows (review finding, session 19).
  if (!stoppedDuringStartup) console.log(`Stopping (${signal}): finishing the work in progress.`);
  await running.stop();
  console.log('Stopped.');
  return 0;
}

/** A start-up failure told in one line (its cause kept), printed without a stack trace. */
class StartupError extends Error {}

/** What Node's `net` and `dns` errors carry besides their message. */
type SystemError = Error & {
  code?: unknown;
  path?: unknown;
  syscall?: unknown;
  hostname?: unknown;
  port?: unknown;
};

/** SQLSTATEs of a PostgreSQL that refuses the connection itself (PostgreSQL docs, Appendix A). */
function isConnectionRefusal(code: string): boolean {
  // 28: invalid authorization (password, pg_hba, unknown role); 3D000: no such database; 08:
  // connection exception; 53300: too many connections; 57P03: cannot connect now (starting up).
  return code.startsWith('28') || code.startsWith('08') || ['3D000', '53300', '57P03'].includes(code);
}

/** System error codes of a connection that could not be made or was cut (Node.js `net`, `dns`). */
const CONNECTION_ERROR_CODES = new Set([
  'ECONNREFUSED',
  'ECONNRESET',
  'ETIMEDOUT',
  'EHOSTUNREACH',
  'ENETUNREACH',
  'ENOTFOUND',
  'EAI_AGAIN',
  'EAI_FAIL',
  'ENOENT',
  'EPIPE',
]);

/** Where a connection's system error comes from (a file's ENOENT is not one). */
const SOCKET_SYSCALLS = new Set(['connect', 'getaddrinfo', 'read', 'write']);

/** pg's own messages for a connection cut while it came up, or refused TLS. */
const PG_CONNECTION_MESSAGES = /^(Connection terminated|The server does not support SSL)/;

/**
 * A one-line message for a failure operators cause and can fix, or undefined: printed instead of
 * a stack trace or a pg error object (review finding, session 18). Never includes the password.
 * - `listen` failed: "Invalid PORT: …" (in use, needs privileges) or "Invalid HOST: …" (not an
 *   address of this machine, or not resolvable).
 * - The connection to DATABASE_URL failed (refused, unresolvable, timed out, TLS, authentication,
 *   no such database): "Cannot reach DATABASE_URL (host:port): <reason>".
 * - The database was migrated by a newer release (`migrate`, `start`, `delete-user`): "The database
 *   schema is newer than this release (N migrations it does not know): …" (review finding).
 */
function startupFailureMessage(error: unknown, config: Config): string | undefined {
  if (!(error instanceof Error)) return undefined;
  if (error instanceof SchemaNewerThanReleaseError) return error.message;
  const failure = error as SystemError;
  if (failure.syscall === 'listen') {
    if (failure.code === 'EADDRINUSE')
      return `Invalid PORT: ${config.PORT} is already in use on HOST ${config.HOST} (another process listens there)`;
    if (failure.code === 'EACCES')
      return `Invalid PORT: this process may not listen on ${config.PORT} (ports below 1024 need privileges)`;
    if (failure.code === 'EADDRNOTAVAIL')
      return `Invalid HOST: ${config.HOST} is not an address of this machine`;
    return `Invalid HOST/PORT: cannot listen on HOST ${config.HOST}, PORT ${config.PORT} (${failure.code ?? failure.message})`;
  }
  if (config.DATABASE_URL) {
    const message = databaseFailureMessage(error, config.DATABASE_URL);
    if (message) return message;
  }
  if (failure.syscall === 'getaddrinfo' && failure.hostname === config.HOST)
    return `Invalid HOST: ${config.HOST} cannot be resolved to an address (${failure.code})`;
  const dataDirMessage = dataDirFailureMessage(failure, config.DATA_DIR);
  if (dataDirMessage) return dataDirMessage;
  return undefined;
}

/** File-system error codes that mean DATA_DIR cannot be used as Postwright's directory. */
const DATA_DIR_ERROR_CODES = new Set(['ENOTDIR', 'EACCES', 'EPERM', 'EROFS', 'EEXIST', 'ENOSPC', 'EISDIR']);

/**
 * "Invalid DATA_DIR: …" when `failure` is a file-system error on a path inside `dataDir` (a file
 * given as DATA_DIR, a read-only or full disk, no permission); it printed a stack trace (review
 * finding, session 19). Undefined for other errors and for `memory://`.
 */
function dataDirFailureMessage(failure: SystemError, dataDir: string): string | undefined {
  if (dataDir.startsWith('memory://') || typeof failure.code !== 'string') return undefined;
  if (!DATA_DIR_ERROR_CODES.has(failure.code) || typeof failure.path !== 'string') return undefined;
  const directory = path.resolve(dataDir);
  const failed = path.resolve(failure.path);
  if (failed !== directory && !failed.startsWith(directory + path.sep)) return undefined;
  return `Invalid DATA_DIR: ${directory} cannot be used as a writable directory (${failure.code} at ${failed})`;
}

/** `value` percent-decoded, or as it is when it is not valid percent-encoding. */
function safeDecode(value: string): string {
  try {
    return decodeURIComponent(value);
  } catch {
    return value;
  }
}

/** "Cannot reach DATABASE_URL (host:port): <reason>" when `error` is a failure to connect to it. */
function databaseFailureMessage(error: Error, databaseUrl: string): string | undefined {
  const url = new URL(databaseUrl);
  // A Unix socket is named by ?host=<directory> (libpq's convention, which pg follows).
  const host = url.hostname || url.searchParams.get('host') || 'localhost';
  const port = url.port || '5432';
  let reason: string | undefined;
  // Drizzle and pg-boss wrap the driver's error; its cause is the one that says why.
  for (let e: unknown = error; e instanceof Error && reason === undefined; e = e.cause) {
    const failure = e as SystemError;
    if (e instanceof pg.DatabaseError && e.code && isConnectionRefusal(e.code)) reason = e.message;
    else if (
      typeof failure.code === 'string' &&
      CONNECTION_ERROR_CODES.has(failure.code) &&
      (e instanceof AggregateError || SOCKET_SYSCALLS.has(String(failure.syscall)))
    ) {
      const foreignHost = failure.syscall === 'getaddrinfo' && failure.hostname !== host;
      const foreignPort = typeof failure.port === 'number' && String(failure.port) !== port;
      if (!foreignHost && !foreignPort) reason = e.message || failure.code;
    } else if (typeof failure.code === 'string' && /CERT|TLS|SSL/.test(failure.code)) reason = e.message;
    else if (/connection timeout|timeout exceeded when trying to connect/.test(e.message))
      reason = `no answer within ${POOL_CONNECTION_TIMEOUT_MS / 1000} s`;
    else if (PG_CONNECTION_MESSAGES.test(e.message)) reason = e.message;
  }
  if (reason === undefined) return undefined;
  const firstLine = reason.split('\n')[0]!;
  // pg never puts the password in a message; this keeps it so should one ever do.
  let safe = firstLine;
  for (const password of [url.password, safeDecode(url.password)])
    if (password) safe = safe.replaceAll(password, '***');
  return `Cannot reach DATABASE_URL (${host}:${port}): ${safe}`;
}

/** True when `host` (HOST) is `localhost` or a loopback address (127.0.0.0/8, ::1, ::ffff:127.x). */
function isLoopbackHost(host: string): boolean {
  return host === 'localhost' || (ipaddr.isValid(host) && ipaddr.process(host).range() === 'loopback');
}

/**
 * `postwright pdf-renderer` (issue #12): the bundled Gotenberg-compatible renderer alone, on
 * HOST:PORT, until SIGINT/SIGTERM. Point other Postwright processes at it with PDF_RENDERER_URL.
 * With PDF_RENDERER_USERNAME/PASSWORD it requires them as HTTP Basic credentials (Gotenberg's
 * `--api-enable-basic-auth`); without them it serves only on a loopback HOST.
 * @returns the exit code: 0 after a clean stop, 1 when Chromium is not at CHROMIUM_PATH or when a
 *   non-loopback HOST has no credentials.
 */
async function servePdfRenderer(config: Config): Promise<number> {
  const { BROWSER_IDLE_CLOSE_MS, chromiumAvailable, loadPdfRendererServer } = await import(
    './modules/pdf/index.ts'
  );
  if (!chromiumAvailable(config.CHROMIUM_PATH)) {
    console.error(`Chromium not found at CHROMIUM_PATH (${config.CHROMIUM_PATH}).`);
    return 1;
  }
  const credentials =
    config.PDF_RENDERER_USERNAME !== undefined && config.PDF_RENDERER_PASSWORD !== undefined
      ? { username: config.PDF_RENDERER_USERNAME, password: config.PDF_RENDERER_PASSWORD }
      : undefined;
  if (!credentials && !isLoopbackHost(config.HOST)) {
    console.error(
      `Refusing to serve the PDF renderer on HOST=${config.HOST} without credentials: anyone who can reach it could make its Chromium render. Set PDF_RENDERER_USERNAME and PDF_RENDERER_PASSWORD (then PDF_RENDERER_URL=http://user:password@host:port for the Postwright processes), or HOST=127.0.0.1.`,
    );
    return 1;
  }
  const { startPdfRenderer } = await loadPdfRendererServer();
  const renderer = await startPdfRenderer(
    { host: config.HOST, port: config.PORT },
    {
      executablePath: config.CHROMIUM_PATH,
      pages: config.PDF_RENDERER_PAGES,
      renderTimeoutMs: config.PDF_RENDER_TIMEOUT_SECONDS * 1000,
      allowedImageHosts: config.PDF_ALLOWED_IMAGE_HOSTS,
      idleCloseMs: BROWSER_IDLE_CLOSE_MS,
    },
    credentials,
  );
  console.log(
    `Postwright PDF renderer listening on ${renderer.url}${credentials ? ' (HTTP Basic credentials required)' : ''}`,
  );
  await new Promise<void>((resolve) => {
    process.once('SIGINT', resolve);
    process.once('SIGTERM', resolve);
  });
  await renderer.close();
  return 0;
}

main(process.argv.slice(2)).then(
  (code) => process.exit(code),
  (error: unknown) => {
    if (
      error instanceof ConfigError ||
      error instanceof EmbeddedPostgresError ||
      error instanceof StartupError
    )
      console.error(error.message);
    else console.error(error);
    process.exit(1);
  },
);

/**
 * `postwright delete-user <email>`: see deleteUserByEmail (teams module). Prints the account, the
 * teams it left and each team deleted with it; then removes the deleted teams' files from the
 * configured storage (after the commit) and says how many, and which could not be.
 * @returns 0 when deleted (even if files were left in storage), 1 when refused, 2 without an email.
 */
async function deleteUser(config: Config, email: string | undefined): Promise<number> {
  if (!email) {
    console.error(`delete-user needs the account's email.\n\n${USAGE}`);
    return 2;
  }
  const database = await openDatabase({ databaseUrl: config.DATABASE_URL, dataDir: config.DATA_DIR });
  try {
    await migrateDatabase(database);
    const { deleteUserByEmail } = await import('./modules/teams/index.ts');
    const { userId, teamIds, deletedTeams } = await deleteUserByEmail(database.db, email);
    console.log(`Deleted ${email} (${userId}); removed from ${teamIds.length} team(s).`);
    for (const team of deletedTeams)
      console.log(
        `Deleted team "${team.name}" (${team.id}) with everything in it: ${email} was its only member.`,
      );
    if (deletedTeams.length > 0) await removeTeamFiles(config, deletedTeams);
    return 0;
  } catch (error) {
    const { AppError } = await import('./http/errors.ts');
    if (!(error instanceof AppError)) throw error;
    console.error(`Not deleted: ${error.message}.`);
    return 1;
  } finally {
    await database.close();
  }
}

/** Removes the deleted teams' stored files (uploads, thumbnails) and prints what became of them. */
async function removeTeamFiles(config: Config, deletedTeams: DeletedTeam[]): Promise<void> {
  const { removeDeletedTeamFiles } = await import('./modules/teams/index.ts');
  const { createFileStorage } = await import('./modules/storage/index.ts');
  // The deletion has committed: a storage that cannot be opened leaves the files, said so, exit 0.
  const storage = await createFileStorage(config).catch((error: unknown) => {
    console.error(`Files of the deleted team(s) left in storage: cannot open it (${String(error)}).`);
    return undefined;
  });
  if (!storage) return;
  try {
    const { removed, absent, left } = await removeDeletedTeamFiles(storage, deletedTeams);
    if (removed.length + absent.length + left.length === 0) return;
    console.log(
      `Storage: removed ${removed.length} file(s) of the deleted team(s)${absent.length > 0 ? `; ${absent.length} not found (is this the server's storage?)` : ''}.`,
    );
    if (left.length > 0) {
      console.error(`Left in storage (${left.length}), remove them by hand:`);
      for (const { key, reason } of left) console.error(`  ${key}: ${reason}`);
    }
  } finally {
    await storage.close();
  }
}
