import { eq } from 'drizzle-orm';
import { users } from '../../db/schema/index.ts';
import { getTemplate } from '../templates/index.ts';
import { type AcceptedSend, type AcceptSendDeps, acceptSend } from './send.service.ts';

/** Body of `POST /api/templates/:id/send-test` (issue #13 "send test email to yourself"). */
export interface TestSendInput {
  /** Values for the template's variables; `{}` when absent (templates keep no sample values). */
  variables?: Record<string, unknown> | undefined;
  /** One of the team's active adapters; the team's default (sending) adapter when absent. */
  adapterId?: string | undefined;
}

/**
 * `POST /api/templates/:id/send-test` (issue #13, the template preview's "send test email"): sends
 * the template's current version, rendered with `input.variables`, to the signed-in user's own
 * account address only (never a caller-chosen recipient, so the dashboard cannot be used to mail
 * third parties), through the normal send path ({@link acceptSend}: a log and an `email.send`
 * job committed together, the team's default adapter or `adapterId`, suppression applied by the
 * worker as for any send). The subject is the template's, unprefixed: the test shows exactly what
 * recipients get; the log is told apart by its metadata `{testSend: "true", requestedBy: userId}`
 * and its API key being null.
 * Returns what the send API answers: {id (email log id), jobId, status: "queued"}.
 * @throws NOT_FOUND (404) when the template (id or slug) is not the team's;
 *   INVALID_TEMPLATE (400) when it is inactive or does not render with these variables, and
 *   VALIDATION_ERROR (400, details.reason NO_ACTIVE_ADAPTER, NO_SENDER, UNKNOWN_ADAPTER or
 *   ADAPTER_DISABLED), PDF errors: all as `POST /api/v1/send` ({@link acceptSend}).
 */
export async function sendTemplateTest(
  deps: AcceptSendDeps,
  caller: { teamId: string; userId: string },
  templateIdOrSlug: string,
  input: TestSendInput,
): Promise<AcceptedSend> {
  const template = await getTemplate(deps.db, caller.teamId, templateIdOrSlug);
  const [user] = await deps.db
    .select({ email: users.email })
    .from(users)
    .where(eq(users.id, caller.userId))
    .limit(1);
  // The guard found the session's user a moment ago; a user deleted since is not the caller's fault.
  if (!user) throw new Error(`session user ${caller.userId} not found`);
  return acceptSend(
    deps,
    { teamId: caller.teamId, apiKeyId: null },
    {
      templateId: template.id,
      to: user.email,
      variables: input.variables ?? {},
      ...(input.adapterId ? { adapterId: input.adapterId } : {}),
      metadata: { testSend: 'true', requestedBy: caller.userId },
    },
  );
}
