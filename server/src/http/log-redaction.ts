import { withoutQueryParameters } from '../db/errors.ts';

/** Query parameters whose values are secrets (the setup token travels in the OAuth start URL). */
const SECRET_QUERY_PARAMETERS = new Set(['setupToken', 'token', 'code', 'state']);

/**
 * Path segments that carry an invitation's acceptance token: the API's `/invitations/<token>`
 * (also masks the harmless ids of `/api/team/invitations/:id`) and the dashboard's
 * `/invite/<token>`, which also travels inside query values such as `redirectTo`.
 */
const TOKEN_IN_PATH = /(\/(?:invitations|invite)\/)[^/?#&]+/g;

/**
 * Request paths whose last part is a credential or carries private data (issue #11): the provider
 * events URL's token (`/api/provider-events/<adapterId>/<token>`, which alone authenticates an
 * adapter without a signing secret) and the tracking tokens (`/t/o/<token>`, `/t/c/<token>`: a
 * click token holds the link it redirects to, often a password-reset or sign-in link).
 */
const SECRET_PATH_TAIL = /^(\/api\/provider-events\/[^/?#]+\/|\/t\/[oc]\/).+$/;

function maskTokensInPath(value: string): string {
  return value.replace(TOKEN_IN_PATH, '$1[redacted]');
}

/**
 * A request URL safe for logs: secret query values replaced by `[redacted]`, invitation tokens
 * masked in the path and inside other query values (`redirectTo=/invite/<token>`), and the
 * secret tail of provider-event and tracking paths masked (SECRET_PATH_TAIL).
 */
export function redactUrl(url: string): string {
  const [path = '', query] = url.split('?', 2);
  const maskedPath = maskTokensInPath(path).replace(SECRET_PATH_TAIL, '$1[redacted]');
  if (query === undefined) return maskedPath;
  const params = new URLSearchParams(query);
  for (const [name, value] of [...params.entries()]) {
    if (SECRET_QUERY_PARAMETERS.has(name)) params.set(name, '[redacted]');
    else if (TOKEN_IN_PATH.test(value)) params.set(name, maskTokensInPath(value));
    TOKEN_IN_PATH.lastIndex = 0;
  }
  return `${maskedPath}?${params.toString()}`;
}

/**
 * An error as logs may show it: a fresh Error with the same name, message (a database error's
 * statement parameters cut off, `withoutQueryParameters`), SQLSTATE `code` and stack, but without
 * the causes Drizzle chains to it (they repeat the parameters). Pino's `err` serializer renders it
 * as usual. Anything that is not an Error is returned unchanged.
 */
export function errorForLog(error: unknown): unknown {
  if (!(error instanceof Error)) return error;
  const redacted = withoutQueryParameters(error);
  if (redacted !== error) return redacted;
  const copy = new Error(error.message);
  copy.name = error.name;
  copy.stack = error.stack;
  const code = (error as { code?: unknown }).code;
  return typeof code === 'string' ? Object.assign(copy, { code }) : copy;
}
