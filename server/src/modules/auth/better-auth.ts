import { hkdfSync, randomUUID } from 'node:crypto';
import { getCurrentAdapter } from 'better-auth';
import { drizzleAdapter } from 'better-auth/adapters/drizzle';
import { betterAuth } from 'better-auth/minimal';
import { organization } from 'better-auth/plugins/organization';
import type { Config } from '../../config.ts';
import type { DatabaseHandle } from '../../db/client.ts';
import {
  accounts,
  invitations,
  members,
  sessions,
  teams,
  users,
  verifications,
} from '../../db/schema/auth.ts';
import { type IdKind, newId } from '../../ids.ts';
import { accessControl, teamRoles } from './access-control.ts';
import { findFirstTeamId } from './auth.repository.ts';

/**
 * The request header through which the mount hands better-auth the client IP as Fastify
 * resolved it (`request.ip`: the socket address, or the forwarded one when TRUST_PROXY is on).
 * The mount overwrites whatever a client sent in it.
 */
export const CLIENT_IP_HEADER = 'x-postwright-client-ip';

/** Cookie prefix: the session cookie is `postwright.session_token` (`__Secure-` first on https). */
export const COOKIE_PREFIX = 'postwright';

/** better-auth's model names → our id prefixes (src/ids.ts). */
const ID_KIND_OF_MODEL: Record<string, IdKind> = {
  user: 'user',
  session: 'session',
  account: 'account',
  verification: 'verification',
  organization: 'team',
  member: 'member',
  invitation: 'invitation',
};

/**
 * better-auth's secret (cookie signing, token encryption) derived from ENCRYPTION_KEY with
 * HKDF-SHA256 (RFC 5869), so no extra environment variable is needed and the adapter-config
 * key itself is never used for a second purpose.
 */
export function deriveAuthSecret(encryptionKey: Buffer): string {
  const derived = hkdfSync('sha256', encryptionKey, 'postwright', 'better-auth secret v1', 32);
  return Buffer.from(derived).toString('base64url');
}

function authLogLevel(level: Config['LOG_LEVEL']): 'error' | 'warn' | 'info' | 'debug' | undefined {
  if (level === 'silent') return undefined;
  if (level === 'fatal' || level === 'error') return 'error';
  if (level === 'debug' || level === 'trace') return 'debug';
  return 'warn';
}

/**
 * The team of the user's oldest membership, read through better-auth's current adapter: inside
 * its transactions (e.g. change-password creating a fresh session) that is the transaction's,
 * because on PGlite (one connection) a query beside an open transaction would wait forever.
 */
async function firstTeamIdThroughAdapter(
  adapter: { findMany: <T>(query: FindManyQuery) => Promise<T[]> },
  userId: string,
): Promise<string | null> {
  const [member] = await adapter.findMany<{ organizationId: string }>({
    model: 'member',
    where: [{ field: 'userId', value: userId }],
    sortBy: { field: 'createdAt', direction: 'asc' },
    limit: 1,
  });
  return member?.organizationId ?? null;
}

interface FindManyQuery {
  model: string;
  where: Array<{ field: string; value: string }>;
  sortBy: { field: string; direction: 'asc' | 'desc' };
  limit: number;
}

function buildAuth(deps: { config: Config; database: DatabaseHandle; encryptionKey: Buffer }) {
  const { config, database } = deps;
  const logLevel = authLogLevel(config.LOG_LEVEL);
  return betterAuth({
    appName: 'Postwright',
    baseURL: config.BASE_URL,
    basePath: '/api/auth',
    secret: deriveAuthSecret(deps.encryptionKey),
    trustedOrigins: [new URL(config.BASE_URL).origin],
    database: drizzleAdapter(database.db, {
      provider: 'pg',
      schema: { users, sessions, accounts, verifications, teams, members, invitations },
      transaction: true,
    }),
    user: { modelName: 'users' },
    session: { modelName: 'sessions' },
    account: { modelName: 'accounts' },
    verification: { modelName: 'verifications' },
    // Accounts come from the first-run setup (and later invitations): no public sign-up.
    emailAndPassword: { enabled: true, disableSignUp: true, minPasswordLength: 8, maxPasswordLength: 128 },
    rateLimit: { enabled: true, storage: 'memory' },
    telemetry: { enabled: false },
    logger: logLevel ? { level: logLevel } : { disabled: true },
    databaseHooks: {
      session: {
        create: {
          // Every new session starts in a team: the user's oldest membership.
          before: async (session, context) => {
            if (session.activeOrganizationId) return;
            const teamId = context
              ? await firstTeamIdThroughAdapter(
                  await getCurrentAdapter(context.context.adapter),
                  session.userId,
                )
              : await findFirstTeamId(database.db, session.userId);
            if (teamId) return { data: { ...session, activeOrganizationId: teamId } };
          },
        },
      },
    },
    advanced: {
      cookiePrefix: COOKIE_PREFIX,
      // better-auth skips its Origin check when NODE_ENV=test; keep it on so tests see production behaviour.
      disableOriginCheck: false,
      database: {
        generateId: ({ model }) => {
          const kind = ID_KIND_OF_MODEL[model];
          return kind ? newId(kind) : randomUUID();
        },
      },
      // better-auth reads the client IP from headers only; the mount always sets this one.
      ipAddress: { ipAddressHeaders: [CLIENT_IP_HEADER] },
    },
    plugins: [
      organization({
        ac: accessControl,
        roles: teamRoles,
        creatorRole: 'owner',
        schema: {
          organization: { modelName: 'teams' },
          member: { modelName: 'members' },
          invitation: { modelName: 'invitations' },
        },
      }),
    ],
  });
}

/** The configured better-auth instance (see {@link createAuth}). */
export type Auth = ReturnType<typeof buildAuth>;

/**
 * Builds better-auth for Postwright (ARCHITECTURE.md "Auth notes"; issue #2):
 * - Drizzle adapter (pg) over our tables: user→users, session→sessions, account→accounts,
 *   verification→verifications, organization→teams, member→members, invitation→invitations;
 *   ids with our prefixes (`usr_`, `ses_`, `acc_`, `vrf_`, `team_`, `mem_`, `inv_`).
 * - Email + password sign-in without public sign-up; sessions start in the user's first team.
 * - The organization plugin as teams, with the roles owner/admin/member/viewer of
 *   `permissions.ts` built with its access control (its invitation/member rights merged in).
 * - `secret` derived from `encryptionKey` (HKDF-SHA256); `baseURL` and the only trusted origin
 *   are BASE_URL; cookies prefixed `postwright`.
 * - Its own rate limiter (memory) keyed by the client IP that the mount passes in
 *   {@link CLIENT_IP_HEADER}.
 */
export function createAuth(deps: { config: Config; database: DatabaseHandle; encryptionKey: Buffer }): Auth {
  return buildAuth(deps);
}
