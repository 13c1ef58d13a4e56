/**
 * Keeps a dashboard page on the team its switcher names, and signed in, although the session (its
 * active team, its sign-in) is shared by every tab of the browser (review findings, dashboard
 * session: a team switched in a second tab made the first one show and change that team under the
 * old team's name; a session ended elsewhere showed "Authentication required" on every page; a
 * member removed from their active team was stuck on "Not allowed").
 *
 * - Every API call names the team the page shows (`X-Postwright-Team`, client.ts): the team of the
 *   cached `me`. A team route answers 409 `TEAM_SWITCHED` when the session is on another team.
 * - `me` is asked again on window focus (session.ts). Whenever `me` comes back with another team
 *   than the page shows, without this tab having reset it (a switch here resets every query), the
 *   page's other data is reloaded and the user is told: "Your team was switched in another tab:
 *   now showing X".
 * - A failed call (query or mutation) with 409 `TEAM_SWITCHED` asks `me` again (then the above);
 *   with 403 `TEAM_ACCESS_REVOKED` switches the session to the team `/api/auth/me` falls back to
 *   (README "Teams": such a session is refused on team routes until it switches) and reloads; with
 *   401 asks `me` again, which turns null, so the shell goes to `/login?redirectTo=…`.
 */
import { notifications } from '@mantine/notifications';
import { hashKey, type QueryClient } from '@tanstack/react-query';
import { ApiError, api, readShownTeamFrom, unwrap } from './api/client';
import { type Me, meQuery } from './session';

/**
 * Wires {@link QueryClient} `queryClient` as described above; returns the handler for its
 * QueryCache and MutationCache `onError`.
 */
export function syncSessionAcrossTabs(queryClient: QueryClient): (error: unknown) => void {
  readShownTeamFrom(() => queryClient.getQueryData(meQuery.queryKey)?.team.id);
  watchShownTeam(queryClient);
  let recovering = false;
  const recoverOnce = (recover: () => Promise<void>) => {
    // A page fires several calls at once: they fail together, one recovery is enough.
    if (recovering) return;
    recovering = true;
    void recover()
      .catch(() => undefined)
      .finally(() => {
        recovering = false;
      });
  };
  return (error) => {
    if (!(error instanceof ApiError)) return;
    if (error.status === 401) {
      void queryClient.invalidateQueries({ queryKey: meQuery.queryKey });
    } else if (error.details?.reason === 'TEAM_SWITCHED') {
      recoverOnce(() => reloadTeam(queryClient));
    } else if (error.details?.reason === 'TEAM_ACCESS_REVOKED') {
      recoverOnce(() => leaveRevokedTeam(queryClient));
    }
  };
}

/** Reloads everything but `me` and tells the user when `me` changes team under the page. */
function watchShownTeam(queryClient: QueryClient): void {
  const meHash = hashKey(meQuery.queryKey);
  let shown: string | undefined;
  queryClient.getQueryCache().subscribe((event) => {
    if (event.type !== 'updated' || event.query.queryHash !== meHash) return;
    // A reset (switching, creating a team, signing in here) empties `me` first, and so does a
    // cleared cache (signing out here: `me` is made anew, without data): no notice then.
    const team = (event.query.state.data as Me | null | undefined)?.team;
    if (shown && team && team.id !== shown) {
      notifications.show({
        color: 'orange',
        title: 'Team switched',
        message: `Your team was switched in another tab: now showing ${team.name}`,
      });
      queueMicrotask(() => {
        void queryClient.resetQueries({ predicate: (query) => query.queryHash !== meHash });
      });
    }
    shown = team?.id;
  });
}

/**
 * After a 409 TEAM_SWITCHED: asks `me` again (watchShownTeam then reloads the page's data), and asks
 * again the calls refused so, in case the team was switched back meanwhile.
 */
async function reloadTeam(queryClient: QueryClient): Promise<void> {
  await queryClient.fetchQuery({ ...meQuery, staleTime: 0 });
  await queryClient.refetchQueries({
    predicate: (query) =>
      query.state.error instanceof ApiError && query.state.error.details?.reason === 'TEAM_SWITCHED',
  });
}

/**
 * After a 403 TEAM_ACCESS_REVOKED: switches the session to the team `/api/auth/me` falls back to (the
 * oldest remaining membership), then reloads everything. Without a team left, `me` answers NO_TEAM
 * and the shell offers to create one.
 */
async function leaveRevokedTeam(queryClient: QueryClient): Promise<void> {
  try {
    // Read outside the cache: a changed `me` here is this tab's doing, not another tab's.
    const fallback = await unwrap(api.GET('/api/auth/me'));
    const switched = await unwrap(api.POST('/api/auth/switch-team', { body: { teamId: fallback.team.id } }));
    notifications.show({
      color: 'orange',
      title: 'Removed from a team',
      message: `You are no longer a member of the team you were working in: now in ${switched.team.name}`,
    });
  } finally {
    await queryClient.resetQueries();
  }
}
