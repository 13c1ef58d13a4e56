import type { Config } from '../../config.ts';
import type { Database } from '../../db/client.ts';
import { AppError } from '../../http/errors.ts';
import type { JobPayload } from '../../jobs/definitions.ts';
import type { QueuedJob } from '../../jobs/queue.ts';
import type { JobHandlers, WorkerDeps } from '../../jobs/registry.ts';
import { type ProviderCache, ProviderError } from '../../providers/index.ts';
import { type AdapterRow, providerFor, resolveSendingAdapter } from '../adapters/index.ts';
import { buildInvitationEmail } from './invitation-email.ts';
import { invitationUrl, newInvitationToken } from './invitation-token.ts';
import { teamRepository } from './teams.repository.ts';

/**
 * What the `invitation.send` handler needs: links are `${config.BASE_URL}/invite/<token>`;
 * SMTP_ALLOW_PRIVATE sets the provider's outbound policy.
 */
export interface SendInvitationDeps {
  db: Database;
  encryptionKey: Buffer;
  /** The context's open providers (one connection pool per adapter). */
  providers: ProviderCache;
  config: Pick<
    Config,
    'BASE_URL' | 'ADAPTER_MAX_CONNECTIONS' | 'SMTP_ALLOW_PRIVATE' | 'SEND_TIMEOUT_SECONDS'
  >;
}

/**
 * The `invitation.send` job handler (issue #3): emails an invitation's link through the team's
 * sending adapter (resolved now, as when it was queued: its default when active, else its oldest
 * active one), from the adapter's defaultFrom, with the provider the worker keeps per adapter
 * (`providerFor`). The message reflects the invitation as it is now (role, inviter, expiry).
 *
 * The link's acceptance token is made here, right before sending (issue #8): its SHA-256 replaces
 * the invitation's previous one (`tokenEmailed`; not a proof of the mailbox: the adapter is the
 * team's, see teams.accept-invitation.service.ts), and the token itself
 * exists only in this handler's memory and in the email. So it is in no job payload (pg-boss keeps
 * those in its tables), no response and no log. The cost: each attempt and each renewal sends a new
 * link and the earlier ones stop working; the latest email always holds a working one.
 * Nothing is sent for an invitation that is gone, no longer pending or expired, nor when the team
 * has lost its sending adapter or sender since (logged, completed: retrying cannot help).
 * Transient provider errors are thrown back to the queue, which retries with backoff; a permanent
 * error, or a transient one on the last attempt, is logged and the job completes — the invitation
 * and its link are unaffected.
 */
export function createSendInvitationHandler(deps: SendInvitationDeps) {
  return async function sendInvitation(job: QueuedJob<JobPayload<'invitation.send'>>): Promise<void> {
    const { invitationId, teamId } = job.data;
    const invitation = await teamRepository.findInvitationDetails(deps.db, invitationId);
    if (
      !invitation ||
      invitation.organizationId !== teamId ||
      invitation.status !== 'pending' ||
      invitation.expiresAt.getTime() <= Date.now()
    ) {
      return;
    }

    let adapter: AdapterRow;
    try {
      adapter = await resolveSendingAdapter(deps.db, teamId);
    } catch (error) {
      if (error instanceof AppError && error.details.reason === 'NO_ACTIVE_ADAPTER') {
        console.warn(`[invitation.send] ${invitationId} not sent: team ${teamId} has no active adapter`);
        return;
      }
      throw error;
    }
    if (!adapter.defaultFrom) {
      console.warn(`[invitation.send] ${invitationId} not sent: adapter ${adapter.id} has no defaultFrom`);
      return;
    }

    const { token, tokenHash } = newInvitationToken();
    const open = await teamRepository.replaceInvitationToken(
      deps.db,
      invitationId,
      { tokenHash, tokenEmailed: true },
      new Date(),
    );
    if (!open) return; // accepted, canceled or expired meanwhile

    const message = buildInvitationEmail(
      {
        to: invitation.email,
        teamName: invitation.teamName,
        inviterName: invitation.inviterName,
        role: invitation.role ?? 'member',
        url: invitationUrl(deps.config.BASE_URL, token),
        expiresAt: invitation.expiresAt,
      },
      adapter.defaultFrom,
    );
    try {
      const provider = providerFor(deps, adapter);
      await provider.send(message);
    } catch (error) {
      const permanent = error instanceof AppError || (error instanceof ProviderError && error.permanent);
      if (!permanent && job.retryCount < job.retryLimit) throw error;
      console.error(
        `[invitation.send] ${invitationId} not sent (attempt ${job.retryCount + 1}, ${permanent ? 'permanent' : 'retries exhausted'}):`,
        error instanceof Error ? error.message : error,
      );
    }
  };
}

/** The teams module's job bindings, for the composition root to pass to `startWorkers`. */
export function teamJobHandlers(deps: WorkerDeps): Pick<JobHandlers, 'invitation.send'> {
  return { 'invitation.send': { kind: 'job', handle: createSendInvitationHandler(deps) } };
}
