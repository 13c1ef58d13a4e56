import { TeamReadCache } from '../../db/team-read-cache.ts';
import type { AdapterRow } from './adapters.repository.ts';

/**
 * How long (ms) the adapter a team's sends go through is reused without asking the database.
 * Changes made through this process are seen at once (the adapter services forget the team's
 * entry after they commit); changes made through another process are seen within this bound. The
 * worker reads the logged adapter again before delivering, so an adapter deleted or disabled
 * meanwhile still fails the email rather than sending it.
 */
export const ADAPTER_SEND_CACHE_TTL_MS = 1_000;

/**
 * Each team's sending adapter (issue #9 "Cheap hot path"). One per context (server/src/context.ts),
 * never module state: two apps in one process keep their own. Adapter services call
 * `forgetTeam(teamId)` after a change to the team's adapters has committed.
 */
export type AdapterSendCache = TeamReadCache<AdapterRow>;

/** A new, empty {@link AdapterSendCache} (at most 5,000 teams, each for ADAPTER_SEND_CACHE_TTL_MS). */
export function createAdapterSendCache(): AdapterSendCache {
  return new TeamReadCache({ max: 5_000, ttlMs: ADAPTER_SEND_CACHE_TTL_MS });
}
