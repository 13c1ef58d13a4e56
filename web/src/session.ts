import { queryOptions, useQuery } from '@tanstack/react-query';
import { ApiError, api, unwrap } from './api/client';
import type { paths } from './api/schema';

export type Me = paths['/api/auth/me']['get']['responses'][200]['content']['application/json']['data'];
export type Permission = Me['permissions'][number];

/**
 * The `['me']` query: the signed-in user, team, role and permissions; `null` when not signed in
 * (401). Also read outside components (team-sync.ts), hence options rather than only a hook.
 */
export const meQuery = queryOptions({
  queryKey: ['me'],
  queryFn: async (): Promise<Me | null> => {
    try {
      return await unwrap(api.GET('/api/auth/me'));
    } catch (error) {
      if (error instanceof ApiError && error.status === 401) return null;
      throw error;
    }
  },
  staleTime: 30_000,
});

/**
 * The signed-in user, team, role and permissions; `null` when not signed in (401). Asked again
 * whenever the window gets focus, however fresh: another tab may have switched the session's team
 * or signed out (team-sync.ts then reloads the page's data).
 */
export function useMe() {
  return useQuery({ ...meQuery, refetchOnWindowFocus: 'always' });
}

/** Whether the signed-in member's role grants `permission` (the server checks again). */
export function useCan(): (permission: Permission) => boolean {
  const me = useMe().data;
  return (permission) => me?.permissions.includes(permission) ?? false;
}
