import type { SwaggerTransform } from '@fastify/swagger';
import type { FastifySchema } from 'fastify';
import type { AccessRule } from './access.ts';

/**
 * An answer of a route that its `response` schema cannot hold (a redirect, a binary body), as
 * @fastify/swagger reads a response schema: `type: 'null'` for no body, `headers` by name,
 * `content` by media type. For the document only: Fastify never sees it.
 */
export interface ResponseDoc {
  description: string;
  type?: 'null';
  headers?: Record<string, { type: 'string'; description?: string }>;
  content?: Record<string, { schema: Record<string, unknown> }>;
}

declare module 'fastify' {
  interface FastifySchema {
    /** Answers documented beside `response` (see {@link ResponseDoc}), by status code. */
    responseDocs?: Record<string, ResponseDoc>;
    /**
     * The name the document gives the route's `*` wildcard: `/t/o/*` is `/t/o/{token}` with a path
     * parameter `token` (OpenAPI path templates take names; @fastify/swagger wrote `{*}`).
     */
    wildcardName?: string;
  }
}

/** A 302 answer with its `Location` header, `target` saying where it points. */
export function redirectResponse(description: string, target: string): ResponseDoc {
  return { description, type: 'null', headers: { Location: { type: 'string', description: target } } };
}

/** A 200 answer whose body is the bytes of one of `mediaTypes`. */
export function binaryResponse(description: string, mediaTypes: readonly string[]): ResponseDoc {
  const bytes = { schema: { type: 'string', format: 'binary' } };
  return { description, content: Object.fromEntries(mediaTypes.map((type) => [type, bytes])) };
}

/** An OpenAPI security requirement list (`[{session: []}, {apiKey: []}]`: either one). */
type Security = Record<string, string[]>[];

/**
 * The OpenAPI `security` of a route from its access rule (http/access.ts), the one source of what a
 * route accepts: a session route that also takes API keys with a scope (`apiKeyScopes`, e.g. the
 * log reads with `logs:read`) lists both; a public route none. Hand-written `security` lists said
 * "session" for such routes (review finding, session 16).
 */
export function securityOf(rule: AccessRule): Security {
  if (rule.kind === 'public') return [];
  if (rule.kind === 'apiKey') return [{ apiKey: [] }];
  return rule.apiKeyScopes?.length ? [{ session: [] }, { apiKey: [] }] : [{ session: [] }];
}

/** One sentence naming who may call a route under `rule`: the role permission and the API key scope. */
export function accessSentence(rule: AccessRule): string {
  if (rule.kind === 'public') return 'Access: public.';
  if (rule.kind === 'apiKey') return `Access: an API key with the scope ${rule.scopes.join(' or ')}.`;
  const session = rule.permission
    ? `a session whose role holds ${rule.permission}`
    : 'a session of any team member';
  const key = rule.apiKeyScopes?.length
    ? `, or an API key with the scope ${rule.apiKeyScopes.join(' or ')}`
    : '';
  return `Access: ${session}${key}.`;
}

/** The JSON schema of the spec's error envelope ("Errors"): `{success: false, error: {code, message, details}}`. */
export const ERROR_ENVELOPE_SCHEMA = {
  type: 'object',
  properties: {
    success: { type: 'boolean', enum: [false] },
    error: {
      type: 'object',
      properties: {
        code: { type: 'string' },
        message: { type: 'string' },
        details: { type: 'object', additionalProperties: true },
      },
      required: ['code', 'message', 'details'],
    },
  },
  required: ['success', 'error'],
} as const;

/** {@link ERROR_ENVELOPE_SCHEMA} as every 4xx and 5xx answer of a documented route (a Fastify response schema). */
const ERROR_ENVELOPE = {
  description:
    "An error in the spec's envelope: `error.code` is one of the spec's codes, `details` an object",
  ...ERROR_ENVELOPE_SCHEMA,
} as const;

/**
 * The request header naming the team a dashboard page shows (modules/auth/require-session.ts, step
 * 4), as the JSON schema of a route's `headers`: documented on every session route it applies to
 * (not on `teamFallback` routes), optional. Noticed in session 20: the header was undocumented.
 */
const SHOWN_TEAM_HEADER_DOC = {
  type: 'string',
  description:
    "The team the caller's page shows (the dashboard sends it on every call). When the session is on another team (switched in another tab), the route answers 409 CONFLICT with `details.reason` TEAM_SWITCHED and `details.teamId` (the session's team), and does nothing. Without it, the route acts on the session's team. Ignored on a request made with an API key (`X-API-Key`).",
} as const;

/** The route's `headers` schema with the optional `X-Postwright-Team` header of session routes. */
function withShownTeamHeader(headers: DocumentedSchema['headers']): DocumentedSchema['headers'] {
  const current = (headers ?? {}) as { properties?: Record<string, unknown> };
  return {
    type: 'object',
    ...current,
    properties: { ...current.properties, 'x-postwright-team': SHOWN_TEAM_HEADER_DOC },
  };
}

/** The OpenAPI extension marking a body the route also takes absent (see {@link markOptionalBodies}). */
const OPTIONAL_BODY = 'x-postwright-optional-body';

/** A route's JSON schema after the zod transform, with the keys {@link withAccessDocs} reads. */
type DocumentedSchema = FastifySchema & {
  hide?: boolean;
  description?: string;
  params?: { properties?: Record<string, unknown>; required?: string[] };
  response?: Record<string, unknown>;
};

/**
 * Wraps a @fastify/swagger `transform` (here fastify-type-provider-zod's): each route's document
 * gets the `security` of its access rule, a line naming its permission and scope, its
 * {@link ResponseDoc}s, the error envelope as its 4XX and 5XX answers (every documented route:
 * one without a `response` schema, such as a redirect, answers errors too), a named wildcard
 * (`wildcardName`), the optional `X-Postwright-Team` header on session routes that check it, and a
 * mark when its body may be left out (its zod schema takes `undefined`; @fastify/swagger marks every
 * body required). Review findings, session 16 and the OpenAPI review.
 */
export function withAccessDocs<S extends FastifySchema>(transform: SwaggerTransform<S>): SwaggerTransform<S> {
  return (input) => {
    const out = transform(input);
    const rule = (input.route.config as { access?: AccessRule } | undefined)?.access;
    if (!out.schema) return out;
    const { responseDocs, wildcardName, ...schema } = out.schema as DocumentedSchema;
    if (!rule || schema.hide) return { ...out, schema: schema as S };
    const description = typeof schema.description === 'string' ? `${schema.description}\n\n` : '';
    const body = (input.schema as { body?: { safeParse?: (value: unknown) => { success: boolean } } }).body;
    const optionalBody = typeof body?.safeParse === 'function' && body.safeParse(undefined).success;
    const url = out.url ?? input.url;
    const named = wildcardName && url.endsWith('*') ? nameWildcard(schema, wildcardName) : undefined;
    return {
      ...out,
      ...(named ? { url: `${url.slice(0, -1)}:${wildcardName}` } : {}),
      schema: {
        ...schema,
        ...(named ? { params: named } : {}),
        ...(rule.kind === 'session' && !rule.teamFallback
          ? { headers: withShownTeamHeader(schema.headers) }
          : {}),
        security: securityOf(rule),
        description: `${description}${accessSentence(rule)}`,
        response: { ...schema.response, ...responseDocs, '4XX': ERROR_ENVELOPE, '5XX': ERROR_ENVELOPE },
        ...(optionalBody ? { [OPTIONAL_BODY]: true } : {}),
      } as unknown as S,
    };
  };
}

/** The route's params schema with its `*` parameter called `name`. */
function nameWildcard(schema: DocumentedSchema, name: string): DocumentedSchema['params'] {
  const params = schema.params ?? {};
  const { '*': wildcard, ...others } = params.properties ?? {};
  return {
    ...params,
    properties: { ...others, [name]: wildcard ?? { type: 'string' } },
    required: [...(params.required ?? []).filter((key) => key !== '*'), name],
  };
}

/**
 * A @fastify/swagger `transformObject`: the operations {@link withAccessDocs} marked take their
 * body as optional (`requestBody.required: false`); the mark itself is removed.
 */
export function markOptionalBodies<D>(document: D): D {
  const paths = (document as { paths?: Record<string, Record<string, Record<string, unknown>>> }).paths ?? {};
  for (const operations of Object.values(paths)) {
    for (const operation of Object.values(operations)) {
      if (!operation || typeof operation !== 'object' || !(OPTIONAL_BODY in operation)) continue;
      delete operation[OPTIONAL_BODY];
      const requestBody = operation.requestBody as { required?: boolean } | undefined;
      if (requestBody) requestBody.required = false;
    }
  }
  return document;
}

/** One operation of the document: its path and lower-case method. */
export interface OperationRef {
  path: string;
  method: string;
}

/** The JSON schema of the request body of `ref` in `document`, or undefined. */
function jsonBodySchema(document: unknown, ref: OperationRef): Record<string, unknown> | undefined {
  const paths = (document as { paths?: Record<string, Record<string, unknown>> }).paths;
  const operation = paths?.[ref.path]?.[ref.method] as
    | { requestBody?: { content?: Record<string, { schema?: Record<string, unknown> }> } }
    | undefined;
  return operation?.requestBody?.content?.['application/json']?.schema;
}

/**
 * A @fastify/swagger `transformObject` step: puts (a copy of) the JSON request body schema of
 * `source` at `at` (keys into the schema, e.g. `['properties', 'emails', 'items']`) inside the
 * request body of `target`, keeping the description found there. For a route that validates part
 * of its body with another route's schema at run time (the batch send takes send bodies, validated
 * one by one): the route's own schema leaves that part open, the document need not (OpenAPI review).
 * @throws Error when either body, or the place `at`, is not in the document (a renamed route).
 */
export function reuseRequestBody<D>(
  document: D,
  source: OperationRef,
  target: OperationRef & { at: string[] },
): D {
  const from = jsonBodySchema(document, source);
  let parent = jsonBodySchema(document, target);
  const last = target.at.at(-1);
  for (const key of target.at.slice(0, -1)) parent = parent?.[key] as Record<string, unknown> | undefined;
  if (!from || !parent || !last || !parent[last]) {
    throw new Error(
      `reuseRequestBody: no ${source.method} ${source.path} body, or no ${target.at.join('.')} in ${target.method} ${target.path}`,
    );
  }
  const { description } = parent[last] as { description?: string };
  parent[last] = { ...structuredClone(from), ...(description ? { description } : {}) };
  return document;
}

/**
 * A @fastify/swagger `transformObject` step: every `nullable` schema with an `enum` lists `null`
 * among its values. OpenAPI 3.0.3 (Schema Object, `nullable`): other constraints "retain their
 * defined behavior, and therefore may disallow the use of null as a value", so an enum without
 * `null` refuses it, and strict validators such as ajv refused the real `null` of a recipient's
 * `bounceType` (OpenAPI review).
 * Mutates and returns `document`.
 */
export function allowNullInNullableEnums<D>(document: D): D {
  const seen = new Set<object>();
  const visit = (node: unknown): void => {
    if (!node || typeof node !== 'object' || seen.has(node)) return;
    seen.add(node);
    if (Array.isArray(node)) {
      for (const item of node) visit(item);
      return;
    }
    const schema = node as { nullable?: unknown; enum?: unknown };
    if (schema.nullable === true && Array.isArray(schema.enum) && !schema.enum.includes(null)) {
      schema.enum = [...schema.enum, null];
    }
    for (const value of Object.values(node)) visit(value);
  };
  visit(document);
  return document;
}
