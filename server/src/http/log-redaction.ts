/** Query parameters whose values are secrets (the setup token travels in the OAuth start URL). */
const SECRET_QUERY_PARAMETERS = new Set(['setupToken', 'token', 'code', 'state']);

/**
 * A request URL safe for logs: secret query values replaced by `[redacted]`, and invitation ids
 * (the capability in an invitation link) masked in paths such as `/api/auth/invitations/:id`.
 */
export function redactUrl(url: string): string {
  const [path = '', query] = url.split('?', 2);
  const maskedPath = path.replace(/(\/invitations\/)[^/?#]+/g, '$1[redacted]');
  if (query === undefined) return maskedPath;
  const params = new URLSearchParams(query);
  for (const name of [...params.keys()]) {
    if (SECRET_QUERY_PARAMETERS.has(name)) params.set(name, '[redacted]');
  }
  return `${maskedPath}?${params.toString()}`;
}
