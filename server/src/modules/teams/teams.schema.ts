import { z } from 'zod';
import { envelopeOf } from '../../http/envelope.ts';
import { TEAM_ROLES } from '../auth/index.ts';

/** Days an invitation stays valid (issue #3). */
export const INVITATION_TTL_DAYS = 7;

const role = z.enum(TEAM_ROLES);
const teamName = z.string().trim().min(1).max(100);

// ---- teams -------------------------------------------------------------------------------------

/** Body of `POST /api/teams`. */
export const createTeamBody = z.object({ name: teamName });

/** Body of `POST /api/auth/switch-team`. */
export const switchTeamBody = z.object({ teamId: z.string().min(1).max(100) });

/** A team of the signed-in user with their role in it. */
export const teamView = z.object({
  id: z.string(),
  name: z.string(),
  slug: z.string(),
  role: z.string(),
  createdAt: z.string(),
});
export type TeamView = z.infer<typeof teamView>;

// ---- members -----------------------------------------------------------------------------------

export const memberParams = z.object({ userId: z.string().min(1).max(100) });

/** Body of `PUT /api/team/members/:userId`. */
export const updateMemberBody = z.object({ role });

/** A member of the active team. `joinedAt`: when the membership was created (ISO 8601). */
export const memberView = z.object({
  userId: z.string(),
  name: z.string(),
  email: z.string(),
  role: z.string(),
  joinedAt: z.string(),
});
export type MemberView = z.infer<typeof memberView>;

// ---- invitations -------------------------------------------------------------------------------

export const invitationParams = z.object({ id: z.string().min(1).max(100) });

/** Body of `POST /api/team/invitations`; the email is stored lowercased. */
export const createInvitationBody = z.object({
  email: z
    .email()
    .max(254)
    .transform((e) => e.toLowerCase()),
  role,
});

/** A pending invitation as its team's managers see it. `url`: the link the invitee opens. */
export const invitationView = z.object({
  id: z.string(),
  email: z.string(),
  role: z.string(),
  url: z.string(),
  expiresAt: z.string(),
  createdAt: z.string(),
  inviter: z.object({ id: z.string(), name: z.string() }),
});
export type InvitationView = z.infer<typeof invitationView>;

/**
 * What happens to the invitation email, decided when the invitation is written (no network I/O in
 * the request): `queued` for the `invitation.send` job, which a worker sends through the team's
 * sending adapter (retrying transient provider errors); `skipped` when there is nothing to send
 * with (`reason` NO_ACTIVE_ADAPTER or NO_SENDER). The invitation exists in every case.
 */
export const invitationDelivery = z.object({
  status: z.enum(['queued', 'skipped']),
  reason: z.enum(['NO_ACTIVE_ADAPTER', 'NO_SENDER']).optional(),
});
export type InvitationDelivery = z.infer<typeof invitationDelivery>;

export const createdInvitationView = invitationView.extend({ delivery: invitationDelivery });
export type CreatedInvitationView = z.infer<typeof createdInvitationView>;

/** `GET /api/auth/invitations/:id`: what an invitation is for, shown to anyone holding its link. */
export const invitationSummaryView = z.object({
  id: z.string(),
  email: z.string(),
  role: z.string(),
  team: z.object({ id: z.string(), name: z.string() }),
  inviterName: z.string(),
  expiresAt: z.string(),
  status: z.string(),
  accountExists: z.boolean(),
});
export type InvitationSummaryView = z.infer<typeof invitationSummaryView>;

/**
 * Body of `POST /api/auth/invitations/:id/accept` when not signed in: the new account's name and
 * password (8-128 characters, better-auth's limits as in the first-run setup). Ignored when signed in.
 */
export const acceptInvitationBody = z
  .object({
    name: z.string().trim().min(1).max(100),
    password: z.string().min(8).max(128),
  })
  .nullish();
export type NewAccountInput = NonNullable<z.infer<typeof acceptInvitationBody>>;

/** The membership an accepted invitation created. */
export const acceptedInvitationView = z.object({
  user: z.object({ id: z.string(), name: z.string(), email: z.string() }),
  team: z.object({ id: z.string(), name: z.string(), slug: z.string() }),
  role: z.string(),
});
export type AcceptedInvitationView = z.infer<typeof acceptedInvitationView>;

export const teamListResponse = envelopeOf(teamView.array());
export const teamResponse = envelopeOf(teamView);
export const memberListResponse = envelopeOf(memberView.array());
export const memberResponse = envelopeOf(memberView);
export const invitationListResponse = envelopeOf(invitationView.array());
export const createdInvitationResponse = envelopeOf(createdInvitationView);
export const invitationSummaryResponse = envelopeOf(invitationSummaryView);
export const acceptedInvitationResponse = envelopeOf(acceptedInvitationView);
