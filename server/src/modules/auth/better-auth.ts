import { hkdfSync, randomUUID } from 'node:crypto';
import { getCurrentAdapter } from 'better-auth';
import { drizzleAdapter } from 'better-auth/adapters/drizzle';
import { betterAuth } from 'better-auth/minimal';
import { genericOAuth } from 'better-auth/plugins/generic-oauth';
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
import { COOKIE_PREFIX, usesSecureCookies } from '../../http/session-cookie.ts';
import { type IdKind, newId, newUnguessableId } from '../../ids.ts';
import { accessControl, teamRoles } from './access-control.ts';
import { findFirstTeamId } from './auth.repository.ts';
import { authBeforeHooks } from './auth-hooks.ts';
import { CLIENT_IP_HEADER, loginUrl } from './auth-light.ts';
import { type AuthLog, betterAuthLogger } from './auth-logger.ts';
import { githubClient, googleClient, oidcClient } from './sign-in-methods.ts';
import { type JoinInvitedTeams, signUpHooks } from './sign-up-policy.ts';
import { verifiedEmailReclaim } from './verified-email-reclaim.ts';

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

/**
 * better-auth's routes that must not be reachable from outside:
 * - `/sign-in/social`: OAuth sign-ins start at our `GET /api/auth/sign-in/:provider`, which
 *   validates `redirectTo` and rate-limits, and calls this endpoint through the server API;
 * - `/sign-in/email` when AUTH_PASSWORD=false (404 in our envelope).
 */
function disabledPaths(config: Config): string[] {
  return ['/sign-in/social', ...(config.AUTH_PASSWORD ? [] : ['/sign-in/email'])];
}

/** GitHub and Google as better-auth social providers, when configured. */
function socialProviders(config: Config) {
  const github = githubClient(config);
  const google = googleClient(config);
  return {
    ...(github ? { github: { clientId: github.clientId, clientSecret: github.clientSecret } } : {}),
    ...(google ? { google: { clientId: google.clientId, clientSecret: google.clientSecret } } : {}),
  };
}

/**
 * The OIDC provider `oidc` through genericOAuth: endpoints and JWKS from the issuer's discovery
 * document (OpenID Connect Discovery 1.0), PKCE, and a nonce bound to each flow; the ID token is
 * verified (signature, issuer, audience, nonce) and the provider is not registered without it.
 */
function oidcPlugins(config: Config) {
  const oidc = oidcClient(config);
  if (!oidc) return [];
  return [
    genericOAuth({
      config: [
        {
          providerId: 'oidc',
          name: oidc.name,
          discoveryUrl: `${oidc.issuer}/.well-known/openid-configuration`,
          clientId: oidc.clientId,
          clientSecret: oidc.clientSecret,
          scopes: ['openid', 'email', 'profile'],
          pkce: true,
          requireIdTokenVerification: true,
        },
      ],
    }),
  ];
}

/** What better-auth is built from; `log` and `joinInvitedTeams` come from the app (app.ts). */
export interface AuthDeps {
  config: Config;
  database: DatabaseHandle;
  encryptionKey: Buffer;
  /** The app's logger: better-auth's messages go there, redacted. Without it, to the console. */
  log?: AuthLog | undefined;
  /** Puts a new invitee into the teams that invited them (sign-up-policy.ts). */
  joinInvitedTeams?: JoinInvitedTeams | undefined;
}

function buildAuth(deps: AuthDeps) {
  const { config, database } = deps;
  // The sign-up hooks read through the auth context's adapter when no request context is at hand.
  let contextOf: () => Promise<{ adapter: unknown }> = async () => {
    throw new Error('better-auth is not built yet');
  };
  const userCreation = signUpHooks({
    db: database.db,
    defaultAdapter: async () => (await contextOf()).adapter as never,
    joinInvitedTeams: deps.joinInvitedTeams,
  });
  const teamsPlugin = organization({
    ac: accessControl,
    roles: teamRoles,
    creatorRole: 'owner',
    schema: {
      organization: { modelName: 'teams' },
      member: { modelName: 'members' },
      invitation: { modelName: 'invitations' },
    },
  });
  const auth = betterAuth({
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
    account: {
      modelName: 'accounts',
      // OAuth tokens are not used after sign-in; keep them encrypted at rest all the same.
      encryptOAuthTokens: true,
      // A provider identity joins an existing user only when the provider verified the email, it
      // equals the user's (no trusted providers: trust would skip that check), and the user's own
      // email is verified too (issue #8): otherwise whoever set that account's password would share
      // it with the address's owner. verified-email-reclaim.ts first takes such an account back
      // from whoever set its password, so the owner of the address is not locked out either.
      accountLinking: {
        enabled: true,
        trustedProviders: [],
        allowDifferentEmails: false,
        requireLocalEmailVerified: true,
      },
    },
    verification: { modelName: 'verifications' },
    // Accounts come from the first-run setup and invitations: no public sign-up.
    emailAndPassword: { enabled: true, disableSignUp: true, minPasswordLength: 8, maxPasswordLength: 128 },
    socialProviders: socialProviders(config),
    // The organization plugin's own HTTP endpoints are closed: /api/teams, /api/team/* and the
    // invitation routes apply our rules (last owner, owner-only changes) and call its server API.
    disabledPaths: [...disabledPaths(config), ...Object.values(teamsPlugin.endpoints).map((e) => e.path)],
    // Failed OAuth callbacks (refused sign-up, state mismatch, …) land on the sign-in page.
    // `throw`: an error that is not one of its API errors (a database error, whose message holds
    // the statement's values: session tokens, password hashes) is rethrown to betterAuthMount,
    // which logs it redacted and answers in our envelope; without it better-call's router printed
    // it whole with console.error ("# SERVER_ERROR") and answered a bare 500.
    onAPIError: { errorURL: loginUrl(config), throw: true },
    hooks: { before: authBeforeHooks(config) },
    rateLimit: { enabled: true, storage: 'memory' },
    telemetry: { enabled: false },
    logger: betterAuthLogger(config.LOG_LEVEL, deps.log),
    databaseHooks: {
      user: { create: userCreation },
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
      // The session cookie is `postwright.session_token`, `__Secure-` prefixed on an https
      // BASE_URL: the rule the OpenAPI document names it by (http/session-cookie.ts sessionCookieName).
      cookiePrefix: COOKIE_PREFIX,
      useSecureCookies: usesSecureCookies(config.BASE_URL),
      // better-auth skips its Origin check when NODE_ENV=test; keep it on so tests see production behaviour.
      disableOriginCheck: false,
      database: {
        generateId: ({ model }) => {
          // Random like our own invitation ids (teams.invitations.service.ts), though since issue #8
          // an id accepts nothing: the link carries a separate token.
          if (model === 'invitation') return newUnguessableId('invitation');
          const kind = ID_KIND_OF_MODEL[model];
          return kind ? newId(kind) : randomUUID();
        },
      },
      // better-auth reads the client IP from headers only; the mount always sets this one.
      ipAddress: { ipAddressHeaders: [CLIENT_IP_HEADER] },
    },
    // The reclaim wraps every provider, so it comes after genericOAuth has added its own.
    plugins: [teamsPlugin, ...oidcPlugins(config), verifiedEmailReclaim({ db: database.db, log: deps.log })],
  });
  contextOf = async () => auth.$context;
  return auth;
}

/** The configured better-auth instance (see {@link createAuth}). */
export type Auth = ReturnType<typeof buildAuth>;

/**
 * Builds better-auth for Postwright (ARCHITECTURE.md "Auth notes"; issue #2):
 * - Drizzle adapter (pg) over our tables: user→users, session→sessions, account→accounts,
 *   verification→verifications, organization→teams, member→members, invitation→invitations;
 *   ids with our prefixes (`usr_`, `ses_`, `acc_`, `vrf_`, `team_`, `mem_`, `inv_`).
 * - Email + password sign-in without public sign-up (its endpoint disabled with AUTH_PASSWORD=false);
 *   sessions start in the user's first team.
 * - GitHub and Google (social providers) and OpenID Connect (`oidc`, genericOAuth) when configured
 *   (sign-in-methods.ts); every provider returns to `/api/auth/callback/:providerId`. New
 *   identities get an account only by invitation or through setup (sign-up-policy.ts), and an
 *   invitee joins the inviting teams at once; existing users are linked by a matching email the
 *   provider verified, only when their own email is verified as well (an unverified one is first
 *   reclaimed, verified-email-reclaim.ts). Failed callbacks redirect to `BASE_URL/login?error=<code>`.
 * - Its log messages go to `log` (the app's pino logger), errors without SQL parameters.
 * - The organization plugin as teams, with the roles owner/admin/member/viewer of
 *   `permissions.ts` built with its access control (its invitation/member rights merged in).
 * - `secret` derived from `encryptionKey` (HKDF-SHA256); `baseURL` and the only trusted origin
 *   are BASE_URL; cookies prefixed `postwright` (and `__Secure-` on https, `usesSecureCookies`).
 * - Its own rate limiter (memory) keyed by the client IP that the mount passes in
 *   {@link CLIENT_IP_HEADER}.
 */
export function createAuth(deps: AuthDeps): Auth {
  return buildAuth(deps);
}
