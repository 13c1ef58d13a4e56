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

/** Each team's sending adapter (issue #9 "Cheap hot path"). */
export const adapterSendCache = new TeamReadCache<AdapterRow>({
  max: 5_000,
  ttlMs: ADAPTER_SEND_CACHE_TTL_MS,
});

/** Forgets `teamId`'s cached sending adapter; call after a change to its adapters has committed. */
export function forgetTeamAdapters(teamId: string): void {
  adapterSendCache.forgetTeam(teamId);
}
