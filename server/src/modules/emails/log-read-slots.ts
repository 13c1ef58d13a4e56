import { AppError } from '../../http/errors.ts';
import { KeyedSlots } from '../../keyed-slots.ts';

/**
 * Log reads (list, search, stats: `GET /api/logs`, `GET /api/logs/stats`) one team may run at once
 * in a process. A search over a large team's logs scans them (no index serves `%text%`) and a list
 * runs its page and its count on two connections, so without a bound 20 concurrent searches of
 * one team (a viewer, or a `logs:read` key within its rate limit) held the whole database pool
 * for seconds: other teams' sends waited 9 s to be accepted (review finding, session 15).
 */
export const LOG_READS_PER_TEAM = 2;
/** Log reads of one team that may wait for a slot; past it the request is refused (429). */
export const LOG_READS_WAITING_PER_TEAM = 20;

/** The process's log-read slots, by team (the keyed semaphore the send slots use). */
const slots = new KeyedSlots();

/**
 * Runs `read` once one of the team's {@link LOG_READS_PER_TEAM} slots is free (first come, first
 * served), and returns what it returns.
 * @throws RATE_LIMITED (429, details.retryAfterSeconds) when {@link LOG_READS_WAITING_PER_TEAM}
 *   reads of the team already wait; what `read` throws.
 */
export async function withTeamLogRead<T>(teamId: string, read: () => Promise<T>): Promise<T> {
  if (slots.busy(teamId) >= LOG_READS_PER_TEAM && slots.waiting(teamId) >= LOG_READS_WAITING_PER_TEAM) {
    throw new AppError('RATE_LIMITED', 'Too many log searches of this team at once; try again shortly', {
      retryAfterSeconds: 1,
    });
  }
  const release = await slots.acquire(teamId, LOG_READS_PER_TEAM);
  try {
    return await read();
  } finally {
    release();
  }
}
