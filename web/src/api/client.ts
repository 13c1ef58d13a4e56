/**
 * The dashboard's API client: openapi-fetch over the types generated from the server's OpenAPI
 * document (schema.d.ts, `npm run web:types`), so request and response shapes are never written
 * twice. Every call goes to the same origin with the session cookie.
 */
import createClient from 'openapi-fetch';
import type { paths } from './schema';

export type { paths };

export const api = createClient<paths>({ baseUrl: '', credentials: 'same-origin' });

/**
 * The header naming the team the page shows (server: require-session.ts). The active team belongs
 * to the session, shared by every tab: a team route answers 409 CONFLICT (`details.reason`
 * `TEAM_SWITCHED`) when another tab switched it, instead of showing or changing another team under
 * this page's team name (review finding, dashboard session).
 */
export const SHOWN_TEAM_HEADER = 'X-Postwright-Team';

let shownTeam: () => string | undefined = () => undefined;

/** Where {@link api} reads the team the page shows (the team of the cached `me`); none: no header. */
export function readShownTeamFrom(read: () => string | undefined): void {
  shownTeam = read;
}

api.use({
  onRequest({ request }) {
    const teamId = shownTeam();
    if (teamId) request.headers.set(SHOWN_TEAM_HEADER, teamId);
    return request;
  },
});

/** One entry of `details.issues` of a 400 VALIDATION_ERROR: `path` joined with dots. */
export interface Issue {
  path: string;
  message: string;
}

/**
 * An error answer of the API (`{success: false, error: {code, message, details}}`); `details.reason`
 * names the case where one code covers several (`NO_TEAM`, `TEAM_ACCESS_REVOKED`, `TEAM_SWITCHED`).
 */
export class ApiError extends Error {
  constructor(
    readonly status: number,
    readonly code: string,
    message: string,
    readonly details?: { issues?: Issue[]; reason?: string; permission?: string } & Record<string, unknown>,
  ) {
    super(message);
  }

  /**
   * Field errors by path within the request body (`name`, `config.host`), for forms. Schema
   * validation names the body (`body.name`), services name the field alone: both give `name`.
   */
  fieldErrors(): Record<string, string> {
    return Object.fromEntries(
      (this.details?.issues ?? []).map((i) => [i.path.replace(/^body\./, ''), i.message]),
    );
  }
}

interface Answer<T> {
  data?: T;
  error?: unknown;
  response: Response;
}

/**
 * The `data` of a successful answer of an openapi-fetch call; throws {@link ApiError} with the
 * envelope's code and message otherwise (a body that is not the envelope gives code HTTP_<status>).
 */
export async function unwrap<T>(call: Promise<Answer<T>>): Promise<T extends { data: infer D } ? D : T> {
  const { data, error, response } = await call;
  if (!response.ok) {
    const envelope = (error ?? {}) as { error?: { code?: string; message?: string; details?: never } };
    throw new ApiError(
      response.status,
      envelope.error?.code ?? `HTTP_${response.status}`,
      envelope.error?.message ?? response.statusText ?? 'Request failed',
      envelope.error?.details,
    );
  }
  const body = data as { data?: unknown } | undefined;
  return (body && typeof body === 'object' && 'data' in body ? body.data : body) as never;
}

/** POST/GET to an endpoint outside the document (better-auth's sign-in and sign-out). */
export async function rawJson(method: 'GET' | 'POST', url: string, body?: unknown): Promise<unknown> {
  const response = await fetch(url, {
    method,
    credentials: 'same-origin',
    headers: body === undefined ? {} : { 'content-type': 'application/json' },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const text = await response.text();
  const json = text ? (JSON.parse(text) as Record<string, unknown>) : {};
  if (!response.ok) {
    const error = (json.error ?? {}) as { code?: string; message?: string };
    throw new ApiError(
      response.status,
      error.code ?? `HTTP_${response.status}`,
      error.message ?? (json.message as string | undefined) ?? response.statusText,
    );
  }
  return json;
}
