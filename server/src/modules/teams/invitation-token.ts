import { createHash, randomBytes } from 'node:crypto';

/**
 * The acceptance token of an invitation link (issue #8 "Security hardening"): the only credential
 * of `GET /api/auth/invitations/:token` and `POST …/accept`. It is not the invitation's id (which
 * managers see, list and cancel by) and is never stored: the database keeps its SHA-256. It travels
 * in the invitation email, or, when no adapter can send that, once in the create response.
 */

/** Random bytes per token: 256 bits, written as 43 base64url characters. */
const TOKEN_BYTES = 32;

/** A new token and the SHA-256 (hex) to store for it. */
export function newInvitationToken(): { token: string; tokenHash: string } {
  const token = randomBytes(TOKEN_BYTES).toString('base64url');
  return { token, tokenHash: hashInvitationToken(token) };
}

/** SHA-256 (hex) of a token as received: what `invitations.token_hash` holds. */
export function hashInvitationToken(token: string): string {
  return createHash('sha256').update(token, 'utf8').digest('hex');
}

/** The link an invitee opens: the dashboard's `${baseUrl}/invite/<token>` page. */
export function invitationUrl(baseUrl: string, token: string): string {
  return `${baseUrl}/invite/${encodeURIComponent(token)}`;
}
