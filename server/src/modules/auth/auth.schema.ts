import { z } from 'zod';
import { envelopeOf } from '../../http/envelope.ts';
import { PERMISSIONS, TEAM_ROLES } from '../../http/permissions.ts';
import { SIGN_IN_METHOD_IDS } from './sign-in-methods.ts';

/** Body of `POST /api/auth/setup` (issue #2). Passwords: 8-128 characters (better-auth's limits). */
export const setupBody = z.object({
  token: z.string().min(1).max(200),
  name: z.string().trim().min(1).max(100),
  email: z.email().max(254),
  password: z.string().min(8).max(128),
  teamName: z.string().trim().min(1).max(100),
});
export type SetupInput = z.infer<typeof setupBody>;

const userSummary = z.object({ id: z.string(), name: z.string(), email: z.string() });
const teamSummary = z.object({ id: z.string(), name: z.string(), slug: z.string() });

export const setupStatusResponse = envelopeOf(z.object({ required: z.boolean() }));

export const setupResponse = envelopeOf(z.object({ user: userSummary, team: teamSummary }));

export const meResponse = envelopeOf(
  z.object({
    user: userSummary,
    team: teamSummary,
    role: z.enum(TEAM_ROLES),
    permissions: z.array(z.enum(PERMISSIONS)),
    teams: z.array(teamSummary.extend({ role: z.string() })),
  }),
);

/** `GET /api/auth/providers` (issue #3): the enabled sign-in methods in display order. */
export const providersResponse = envelopeOf(
  z.array(
    z.object({
      id: z.enum(SIGN_IN_METHOD_IDS),
      name: z.string(),
      type: z.enum(['password', 'oauth']),
    }),
  ),
);

/**
 * True for a path on this site: one leading `/` not followed by a second `/` or a backslash
 * (browsers read `//host` and `/\host` as another host), no backslash or control character
 * anywhere, and nothing a URL parser would resolve to another origin. `https://…`, `//x`, `/\x`
 * and `x` are refused.
 */
export function isSameOriginPath(value: string): boolean {
  if (!value.startsWith('/') || value.startsWith('//') || value.includes('\\')) return false;
  for (let i = 0; i < value.length; i++) {
    const code = value.charCodeAt(i);
    if (code < 0x20 || code === 0x7f) return false;
  }
  const base = 'http://postwright.invalid';
  try {
    return new URL(value, base).origin === base;
  } catch {
    return false;
  }
}

/** Path parameter of `GET /api/auth/sign-in/:provider`. */
export const signInStartParams = z.object({ provider: z.string().min(1).max(50) });

/**
 * Query of `GET /api/auth/sign-in/:provider`: `redirectTo` (default `/`) is where the callback
 * sends the browser, a same-origin path only ({@link isSameOriginPath}; issue #3: "an absolute or
 * foreign redirect target is refused"); `setupToken` makes it the first-run setup.
 */
export const signInStartQuery = z.object({
  redirectTo: z
    .string()
    .max(2048)
    .refine(isSameOriginPath, 'must be a path on this site, such as /templates')
    .default('/'),
  setupToken: z.string().min(1).max(200).optional(),
});
