import { TeamReadCache } from '../../db/team-read-cache.ts';
import type { TemplateRow, TemplateVersionRow } from './templates.repository.ts';

/**
 * How long (ms) a template resolved for sending is reused without asking the database. Edits made
 * through this process are seen at once (the template services forget the team's entries after
 * they commit); edits made through another process are seen within this bound. A template deleted
 * meanwhile is never sent: the log's foreign key refuses it (see resolveTemplateForSend).
 */
export const TEMPLATE_SEND_CACHE_TTL_MS = 1_000;

/**
 * Templates resolved for sending, by team and the id or slug the sender named (issue #9 "Cheap hot
 * path"). One per context (server/src/context.ts), never module state: two apps in one process
 * keep their own. Template services call `forgetTeam(teamId)` after a change to a template
 * (content, slug, isActive, current version, deletion) has committed; the send path calls it when
 * a cached template turned out to be gone.
 */
export type TemplateSendCache = TeamReadCache<{ template: TemplateRow; version: TemplateVersionRow }>;

/** A new, empty {@link TemplateSendCache} (at most 5,000 entries, each for TEMPLATE_SEND_CACHE_TTL_MS). */
export function createTemplateSendCache(): TemplateSendCache {
  return new TeamReadCache({ max: 5_000, ttlMs: TEMPLATE_SEND_CACHE_TTL_MS });
}
