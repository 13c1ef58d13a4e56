import { z } from 'zod';
import { envelopeOf } from '../../http/envelope.ts';
import { PERMISSIONS, TEAM_ROLES } from './permissions.ts';

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
