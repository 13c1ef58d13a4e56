import { expect } from 'vitest';
import { transitionMany } from '../../src/modules/emails/index.ts';
import type { TestContext } from './app.ts';
import { sessionHeaders } from './auth.ts';
import { dataOf, send } from './factories.ts';
import { FAKE_ADAPTER_TYPES, FAKE_CREDENTIALS, type FakeKind } from './fake-providers.ts';
import { createTeamWithKey, type SendingTeam } from './sending-team.ts';

/** A sending team whose adapter receives provider events (issue #11 "Provider events in"). */
export interface ProviderTeam extends SendingTeam {
  providerAdapterId: string;
  /** The path of the adapter's eventsUrl. */
  eventsPath: string;
}

/**
 * A new team with an adapter of `kind` (config `extra` added) and its eventsUrl, which must have
 * the shape `BASE_URL/api/provider-events/<adapterId>/<43-character token>`.
 */
export async function providerTeam(
  ctx: TestContext,
  kind: FakeKind,
  extra: Record<string, unknown> = {},
): Promise<ProviderTeam> {
  const team = await createTeamWithKey(ctx.app);
  const headers = sessionHeaders(ctx.app, team.owner);
  const created = await dataOf(
    await ctx.app.inject({
      method: 'POST',
      url: '/api/adapters',
      headers,
      payload: {
        name: kind,
        type: FAKE_ADAPTER_TYPES[kind],
        config: { ...FAKE_CREDENTIALS[kind], ...extra },
      },
    }),
    201,
  );
  const adapter = await dataOf(
    await ctx.app.inject({ method: 'GET', url: `/api/adapters/${created.id}`, headers }),
  );
  expect(adapter.eventsUrl).toMatch(
    new RegExp(`^${ctx.config.BASE_URL}/api/provider-events/${created.id}/[A-Za-z0-9_-]{43}$`),
  );
  return { ...team, providerAdapterId: created.id, eventsPath: new URL(adapter.eventsUrl).pathname };
}

/**
 * Sends an email of `team` to `to` (queued) and records it as `sent` with `providerMessageId`,
 * through the team's provider adapter when it has one (events match only the emails the adapter
 * whose URL they come to delivered).
 */
export async function sentEmail(
  ctx: TestContext,
  team: SendingTeam & { providerAdapterId?: string },
  providerMessageId: string,
  to = 'ada@example.com',
): Promise<string> {
  const response = await send(ctx.app, team.key, {
    templateId: team.templateId,
    to,
    variables: { first_name: 'Ada' },
    ...(team.providerAdapterId ? { adapterId: team.providerAdapterId, from: 'sender@example.com' } : {}),
  });
  const { id } = await dataOf(response, 202);
  await ctx.context.db.transaction((tx) =>
    transitionMany(tx, [
      { email: { id, teamId: team.owner.teamId }, event: { status: 'sent', set: { providerMessageId } } },
    ]),
  );
  return id as string;
}

/** POSTs `body` (JSON unless `headers` say otherwise) to a provider-events path of `ctx`'s app. */
export function postProviderEvent(
  ctx: TestContext,
  pathname: string,
  body: string,
  headers: Record<string, string> = {},
) {
  return ctx.app.inject({
    method: 'POST',
    url: pathname,
    headers: { 'content-type': 'application/json', ...headers },
    payload: body,
  });
}
