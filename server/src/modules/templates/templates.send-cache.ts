import { TeamReadCache } from '../../db/team-read-cache.ts';
import { estimatedHeapBytes } from '../../heap-weight.ts';
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

/**
 * Most bytes of templates a {@link TemplateSendCache} keeps (estimatedHeapBytes of the template and
 * version rows, designs included): entries outlive their TTL until pushed out, and a design of
 * 2 MB of JSON may take 40 MB parsed, so 5,000 entries alone did not bound the process's memory.
 */
export const TEMPLATE_SEND_CACHE_MAX_BYTES = 64 * 1024 * 1024;

/**
 * A new, empty {@link TemplateSendCache}: at most 5,000 entries and
 * {@link TEMPLATE_SEND_CACHE_MAX_BYTES}, each for TEMPLATE_SEND_CACHE_TTL_MS.
 */
export function createTemplateSendCache(): TemplateSendCache {
  return new TeamReadCache<{ template: TemplateRow; version: TemplateVersionRow }>({
    max: 5_000,
    ttlMs: TEMPLATE_SEND_CACHE_TTL_MS,
    maxBytes: TEMPLATE_SEND_CACHE_MAX_BYTES,
    weigh: estimatedHeapBytes,
  });
}
