import type { FastifyInstance } from 'fastify';
import { setupOwner, type TeamOwner } from './auth.ts';
import { buildApiKey, buildSmtpAdapter, buildTemplate } from './factories.ts';
import { freePort } from './ports.ts';

/** A team of its own that can send: see {@link createTeamWithKey}. */
export interface SendingTeam {
  /** The team's owner, signed in (`owner.teamId` is the team). */
  owner: TeamOwner;
  /** The API key's one-time secret (`x-api-key`). */
  key: string;
  /** The API key's id (`ak_…`). */
  keyId: string;
  /** The team's default SMTP adapter. */
  adapterId: string;
  /** The template, unless `template: null` was passed. */
  template: { id: string; slug: string; name: string };
  /** `template.id`, for the common `{ templateId }` send body. */
  templateId: string;
}

/**
 * CONVENTIONS.md: "Every test creates its own team, so tests run in parallel and in any order".
 * Creates, through the API, a new team with a signed-in owner, an API key (`POST /api/api-keys`
 * with `key`, default rate limit 10,000/min so a test never meets the limit by accident), an SMTP
 * adapter at 127.0.0.1:`smtpPort` (default: a port nothing listens on, for tests that do not
 * deliver) and a template (`POST /api/templates` with `template`; a one-Text-block design saying
 * "Hello {{ first_name }}", subject "Hi {{ first_name }}"). Fails the test when any step fails.
 */
export async function createTeamWithKey(
  app: FastifyInstance,
  options: {
    smtpPort?: number;
    key?: Record<string, unknown>;
    adapter?: Record<string, unknown>;
    template?: Record<string, unknown>;
  } = {},
): Promise<SendingTeam> {
  const owner = await setupOwner(app);
  const apiKey = await buildApiKey(app, owner, { rateLimit: 10_000, ...options.key });
  const adapter = await buildSmtpAdapter(app, owner, options.smtpPort ?? (await freePort()), options.adapter);
  const template = await buildTemplate(app, owner, options.template);
  return {
    owner,
    key: apiKey.key,
    keyId: apiKey.id,
    adapterId: adapter.id,
    template: { id: template.id, slug: template.slug, name: template.name },
    templateId: template.id,
  };
}
