import { useQuery } from '@tanstack/react-query';
import { ApiError, api, unwrap } from './api/client';
import type { paths } from './api/schema';

export type Me = paths['/api/auth/me']['get']['responses'][200]['content']['application/json']['data'];
export type Permission = Me['permissions'][number];

/** The signed-in user, team, role and permissions; `null` when not signed in (401). */
export function useMe() {
  return useQuery({
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
}

/** Whether the signed-in member's role grants `permission` (the server checks again). */
export function useCan(): (permission: Permission) => boolean {
  const me = useMe().data;
  return (permission) => me?.permissions.includes(permission) ?? false;
}
