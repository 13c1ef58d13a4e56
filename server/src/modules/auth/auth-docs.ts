import { ERROR_ENVELOPE_SCHEMA } from '../../http/access-docs.ts';
import { sessionCookieName } from '../../http/session-cookie.ts';

/**
 * The OpenAPI description of the auth library's endpoints that are open over HTTP (auth.mount.ts
 * `OPEN_AUTH_PATHS` and the providers' callbacks): better-auth serves them outside Fastify's route
 * table, so the generated document had none of them (review findings, session 16 and the OpenAPI
 * review). Their 2xx bodies are better-auth's, outside the `{success, data}` envelope; their
 * errors are in it (auth-error-envelope.ts), 4XX and 5XX.
 */
const errorEnvelope = {
  description: "An error in the spec's envelope",
  content: { 'application/json': { schema: ERROR_ENVELOPE_SCHEMA } },
} as const;

const errors = { '4XX': errorEnvelope, '5XX': errorEnvelope } as const;

const SESSION = [{ session: [] }];

/** A JSON answer of the auth library, `description` saying what it means. */
function json(description: string, schema: Record<string, unknown>) {
  return { description, content: { 'application/json': { schema } } };
}

/** A JSON request body (required) of `properties`, of which `required` must be there. */
function body(properties: Record<string, unknown>, required: string[], extra: Record<string, unknown> = {}) {
  return {
    required: true,
    content: { 'application/json': { schema: { type: 'object', properties, required, ...extra } } },
  };
}

/** A 302 answer to `target`. */
function redirect(description: string, target: string) {
  return { description, headers: { Location: { description: target, schema: { type: 'string' } } } };
}

const nullableString = { type: 'string', nullable: true } as const;

const userSchema = {
  type: 'object',
  properties: {
    id: { type: 'string' },
    email: { type: 'string' },
    name: { type: 'string' },
    emailVerified: { type: 'boolean' },
    image: nullableString,
    createdAt: { type: 'string' },
    updatedAt: { type: 'string' },
  },
} as const;

/** A session as better-auth describes it, without its token (session-token-output.ts). */
const sessionSchema = {
  type: 'object',
  properties: {
    id: { type: 'string' },
    userId: { type: 'string' },
    expiresAt: { type: 'string' },
    createdAt: { type: 'string' },
    updatedAt: { type: 'string' },
    ipAddress: nullableString,
    userAgent: nullableString,
    activeOrganizationId: { ...nullableString, description: 'The active team' },
  },
} as const;

const statusTrue = json('Done', { type: 'object', properties: { status: { type: 'boolean' } } });

const providerParam = {
  name: 'provider',
  in: 'path',
  required: true,
  description: 'github, google or oidc',
  schema: { type: 'string' },
} as const;

/** The provider's return: signs in, then redirects (errors too, to the sign-in page). */
const callbackResponses = {
  302: redirect(
    'Signed in (the session cookie is set) or refused',
    'The redirectTo of the sign-in start, or BASE_URL/login?error=<code> when the sign-in is refused',
  ),
  ...errors,
} as const;

/** OpenAPI path items of the auth library's open endpoints (sign-in, sessions, password, name). */
export const AUTH_LIBRARY_PATHS = {
  '/api/auth/sign-in/email': {
    post: {
      tags: ['auth'],
      summary: 'Sign in with email and password',
      description: `Sets the session cookie (${sessionCookieName('http://x')}; ${sessionCookieName('https://x')} when BASE_URL is https: the name the \`session\` security scheme gives). Answers the auth library's own body \`{redirect, user}\`, outside the envelope. 404 when AUTH_PASSWORD=false. Access: public.`,
      requestBody: body({ email: { type: 'string' }, password: { type: 'string' } }, ['email', 'password']),
      responses: {
        200: json('Signed in; the session cookie is set', {
          type: 'object',
          properties: { redirect: { type: 'boolean' }, user: userSchema },
        }),
        ...errors,
      },
    },
  },
  '/api/auth/sign-up/email': {
    post: {
      tags: ['auth'],
      summary: 'Sign up (always refused)',
      description:
        'Accounts come from the first-run setup and from invitations: always 400 INVALID_INPUT (reason EMAIL_PASSWORD_SIGN_UP_DISABLED). Access: public.',
      responses: { ...errors },
    },
  },
  '/api/auth/sign-out': {
    post: {
      tags: ['auth'],
      summary: 'Sign out',
      description:
        "Ends the session of the cookie. Answers the auth library's own body `{success: true}` (also without a session). Access: a session.",
      security: SESSION,
      responses: {
        200: json('Signed out', { type: 'object', properties: { success: { type: 'boolean' } } }),
        ...errors,
      },
    },
  },
  '/api/auth/get-session': {
    get: {
      tags: ['auth'],
      summary: 'The current session and user',
      description:
        "Answers the auth library's own body `{session, user}` (null without a session; the session token is left out). Access: a session.",
      security: SESSION,
      responses: {
        200: json('The session and its user, or null', {
          type: 'object',
          nullable: true,
          properties: { session: sessionSchema, user: userSchema },
        }),
        ...errors,
      },
    },
  },
  '/api/auth/list-sessions': {
    get: {
      tags: ['auth'],
      summary: "The signed-in user's sessions",
      description:
        "Every session of the user (their devices: IP address and user agent), without tokens. The auth library's own body, an array. Access: a session.",
      security: SESSION,
      responses: {
        200: json("The user's sessions", { type: 'array', items: sessionSchema }),
        ...errors,
      },
    },
  },
  '/api/auth/revoke-sessions': {
    post: {
      tags: ['auth'],
      summary: "End all the signed-in user's sessions",
      description:
        'Signs the user out everywhere, this session included. Answers `{status: true}`. Access: a session.',
      security: SESSION,
      responses: { 200: statusTrue, ...errors },
    },
  },
  '/api/auth/revoke-other-sessions': {
    post: {
      tags: ['auth'],
      summary: "End the signed-in user's other sessions",
      description: 'Signs the user out on every other device. Answers `{status: true}`. Access: a session.',
      security: SESSION,
      responses: { 200: statusTrue, ...errors },
    },
  },
  '/api/auth/change-password': {
    post: {
      tags: ['auth'],
      summary: "Change the signed-in user's password",
      description:
        "Needs the current password (400 INVALID_INPUT, reason INVALID_PASSWORD, when wrong); the new one is 8-128 characters. Always ends the user's other sessions, whatever `revokeOtherSessions` says. Answers `{user}`. Access: a session.",
      security: SESSION,
      requestBody: body(
        {
          currentPassword: { type: 'string' },
          newPassword: { type: 'string', minLength: 8, maxLength: 128 },
          revokeOtherSessions: { type: 'boolean', description: 'Ignored: other sessions always end' },
        },
        ['currentPassword', 'newPassword'],
      ),
      responses: {
        200: json('Password changed', { type: 'object', properties: { user: userSchema } }),
        ...errors,
      },
    },
  },
  '/api/auth/update-user': {
    post: {
      tags: ['auth'],
      summary: "Change the signed-in user's name",
      description:
        'Takes only `name`, 1-100 characters once trimmed (anything else is 400 VALIDATION_ERROR). Answers `{status: true}`. Access: a session.',
      security: SESSION,
      requestBody: body({ name: { type: 'string', minLength: 1, maxLength: 100 } }, ['name'], {
        additionalProperties: false,
      }),
      responses: { 200: statusTrue, ...errors },
    },
  },
  '/api/auth/callback/{provider}': {
    get: {
      tags: ['auth'],
      summary: 'Where an OAuth or OpenID Connect provider returns to',
      description:
        'The provider sends the browser here after GET /api/auth/sign-in/{provider}. Access: public.',
      parameters: [providerParam],
      responses: callbackResponses,
    },
    post: {
      tags: ['auth'],
      summary: 'Where a provider returns to with a form post',
      description: 'Redirects to the GET of the same callback with the posted fields. Access: public.',
      parameters: [providerParam],
      responses: {
        302: redirect('Continues at the GET callback', 'GET /api/auth/callback/{provider} with the fields'),
        ...errors,
      },
    },
  },
  '/api/auth/ok': {
    get: {
      tags: ['auth'],
      summary: 'The auth library answers',
      description: 'Answers `{ok: true}`. Access: public.',
      responses: {
        200: json('The auth library is up', { type: 'object', properties: { ok: { type: 'boolean' } } }),
        ...errors,
      },
    },
  },
  '/api/auth/error': {
    get: {
      tags: ['auth'],
      summary: "The auth library's error page",
      description: 'Redirects to the dashboard sign-in page with the `error` code. Access: public.',
      parameters: [{ name: 'error', in: 'query', required: false, schema: { type: 'string' } }],
      responses: { 302: redirect('To the sign-in page', 'BASE_URL/login?error=<code>'), ...errors },
    },
  },
} as const;
