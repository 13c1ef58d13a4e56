import { ERROR_ENVELOPE_SCHEMA } from '../../http/access-docs.ts';

/**
 * The OpenAPI description of the auth library's own endpoints a client of the API uses (the README
 * quick start signs in with the first): better-auth serves them outside Fastify's route table, so
 * the generated document had none of them (review finding, session 16). Their 2xx bodies are
 * better-auth's, outside the `{success, data}` envelope; their errors are in it.
 */
const errorEnvelope = {
  description: "An error in the spec's envelope",
  content: { 'application/json': { schema: ERROR_ENVELOPE_SCHEMA } },
} as const;

const userSchema = {
  type: 'object',
  properties: {
    id: { type: 'string' },
    email: { type: 'string' },
    name: { type: 'string' },
    emailVerified: { type: 'boolean' },
    createdAt: { type: 'string' },
    updatedAt: { type: 'string' },
  },
} as const;

/** OpenAPI path items of the auth library's sign-in, sign-out and session endpoints. */
export const AUTH_LIBRARY_PATHS = {
  '/api/auth/sign-in/email': {
    post: {
      tags: ['auth'],
      summary: 'Sign in with email and password',
      description:
        "Sets the session cookie (postwright.session_token). Answers the auth library's own body `{redirect, user}`, outside the envelope. 404 when AUTH_PASSWORD=false. Access: public.",
      requestBody: {
        required: true,
        content: {
          'application/json': {
            schema: {
              type: 'object',
              properties: { email: { type: 'string' }, password: { type: 'string' } },
              required: ['email', 'password'],
            },
          },
        },
      },
      responses: {
        200: {
          description: 'Signed in; the session cookie is set',
          content: {
            'application/json': {
              schema: { type: 'object', properties: { redirect: { type: 'boolean' }, user: userSchema } },
            },
          },
        },
        '4XX': errorEnvelope,
      },
    },
  },
  '/api/auth/sign-out': {
    post: {
      tags: ['auth'],
      summary: 'Sign out',
      description:
        "Ends the session of the cookie. Answers the auth library's own body `{success: true}`. Access: a session.",
      security: [{ session: [] }],
      responses: {
        200: {
          description: 'Signed out',
          content: {
            'application/json': { schema: { type: 'object', properties: { success: { type: 'boolean' } } } },
          },
        },
        '4XX': errorEnvelope,
      },
    },
  },
  '/api/auth/get-session': {
    get: {
      tags: ['auth'],
      summary: 'The current session and user',
      description:
        "Answers the auth library's own body `{session, user}` (null without a session; the session token is left out). Access: a session.",
      security: [{ session: [] }],
      responses: {
        200: {
          description: 'The session and its user, or null',
          content: {
            'application/json': {
              schema: {
                type: 'object',
                nullable: true,
                properties: {
                  session: {
                    type: 'object',
                    properties: {
                      id: { type: 'string' },
                      userId: { type: 'string' },
                      expiresAt: { type: 'string' },
                    },
                  },
                  user: userSchema,
                },
              },
            },
          },
        },
        '4XX': errorEnvelope,
      },
    },
  },
} as const;
