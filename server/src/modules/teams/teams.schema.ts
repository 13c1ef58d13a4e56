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

/** `DELETE /api/team/invitations/:id`: the invitation's id, which identifies it and accepts nothing. */
export const invitationParams = z.object({ id: z.string().min(1).max(100) });

/** `/api/auth/invitations/:token[/accept]`: the acceptance token of the link (invitation-token.ts). */
export const invitationTokenParams = z.object({ token: z.string().min(1).max(200) });

/** Body of `POST /api/team/invitations`; the email is stored lowercased. */
export const createInvitationBody = z.object({
  email: z
    .email()
    .max(254)
    .transform((e) => e.toLowerCase()),
  role,
});

/**
 * A pending invitation as its team's managers see it. No link: its token goes to the invitee's
 * mailbox only (or, once, into the create response; see {@link createdInvitationView}).
 */
export const invitationView = z.object({
  id: z.string(),
  email: z.string(),
  role: z.string(),
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

/**
 * The answer of `POST /api/team/invitations`. `url` (`BASE_URL/invite/<token>`) only when the
 * delivery is `skipped`: nothing can email the link, so the inviter gets it this once to pass on
 * (accepting with it then proves nothing about the mailbox). A queued email carries its own link.
 */
export const createdInvitationView = invitationView.extend({
  delivery: invitationDelivery,
  url: z.string().optional(),
});
export type CreatedInvitationView = z.infer<typeof createdInvitationView>;

/**
 * `GET /api/auth/invitations/:token`: what an invitation is for, shown to anyone holding its link.
 * Whether an account exists for the email is not said (issue #8).
 */
export const invitationSummaryView = z.object({
  id: z.string(),
  email: z.string(),
  role: z.string(),
  team: z.object({ id: z.string(), name: z.string() }),
  inviterName: z.string(),
  expiresAt: z.string(),
  status: z.string(),
});
export type InvitationSummaryView = z.infer<typeof invitationSummaryView>;

/**
 * Body of `POST /api/auth/invitations/:token/accept` when not signed in: the new account's name and
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
