#!/usr/bin/env node
import { parseArgs } from 'node:util';
import ipaddr from 'ipaddr.js';
import { type Config, ConfigError, loadConfig, type Role } from './config.ts';
import { migrateDatabase, openDatabase } from './db/client.ts';
import { EmbeddedPostgresError } from './db/embedded-postgres.ts';
import { trimHeapAfterStart } from './heap-trim.ts';
import { reexecWithStartEnvironment } from './start-environment.ts';

const USAGE = `Usage: postwright <command> [options]

Commands:
  start [--role all|api|worker]   Serve the dashboard, the API, /docs and the workers (default role: all)
  migrate                         Apply database migrations and exit
  delete-user <email>             Delete that account (sessions, memberships, invitations it sent);
                                  refused for a team's only owner. Stop an embedded-database server first
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
  if (command === 'migrate') {
    const database = await openDatabase({ databaseUrl: config.DATABASE_URL, dataDir: config.DATA_DIR });
    await migrateDatabase(database);
    await database.close();
    console.log('Migrations applied.');
    return 0;
  }
  if (command === 'delete-user') return deleteUser(config, positionals[1]);
  if (command === 'pdf-renderer') return servePdfRenderer(config);
  if (command !== 'start') {
    console.error(`Unknown command "${command}".\n\n${USAGE}`);
    return 2;
  }
  const role = values.role as Role;
  if (!['all', 'api', 'worker'].includes(role)) {
    console.error(`Invalid --role "${role}": expected all, api or worker.`);
    return 2;
  }
  if (role !== 'all' && !config.DATABASE_URL) {
    console.warn('Running one role on the embedded database: only one process can open DATA_DIR at a time.');
  }
  // A server runs React's production build unless told otherwise (it renders about twice as fast
  // as the development build). React reads NODE_ENV when first loaded, hence the late import.
  process.env.NODE_ENV ??= 'production';
  const { startPostwright } = await import('./runtime.ts');
  const running = await startPostwright(config, role);
  if (running.url)
    console.log(
      `Postwright (${role}) listening on ${running.url} — dashboard at ${config.BASE_URL}/, API docs at ${config.BASE_URL}/docs`,
    );
  else console.log(`Postwright worker started.`);
  // Start-up's garbage and grown young generation stay committed while idle otherwise (issue #9).
  trimHeapAfterStart();
  await new Promise<void>((resolve) => {
    const shutdown = () => {
      process.off('SIGINT', shutdown);
      process.off('SIGTERM', shutdown);
      resolve();
    };
    process.on('SIGINT', shutdown);
    process.on('SIGTERM', shutdown);
  });
  // Stops workers, then the API, the pools and last the embedded PostgreSQL (it runs in its own
  // session, so a terminal's Ctrl-C reached only us). A second signal exits at once; the embedded
  // server is still told to stop on exit.
  const force = () => process.exit(130);
  process.on('SIGINT', force);
  process.on('SIGTERM', force);
  await running.stop();
  return 0;
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
    if (error instanceof ConfigError || error instanceof EmbeddedPostgresError) console.error(error.message);
    else console.error(error);
    process.exit(1);
  },
);

/** `postwright delete-user <email>`: see deleteUserByEmail (teams module). Exit code 1 when refused. */
async function deleteUser(config: Config, email: string | undefined): Promise<number> {
  if (!email) {
    console.error(`delete-user needs the account's email.\n\n${USAGE}`);
    return 2;
  }
  const database = await openDatabase({ databaseUrl: config.DATABASE_URL, dataDir: config.DATA_DIR });
  try {
    await migrateDatabase(database);
    const { deleteUserByEmail } = await import('./modules/teams/index.ts');
    const { userId, teamIds } = await deleteUserByEmail(database.db, email);
    console.log(`Deleted ${email} (${userId}); removed from ${teamIds.length} team(s).`);
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
