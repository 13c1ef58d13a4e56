import type { Auth, AuthDeps } from './better-auth.ts';

/**
 * better-auth, built over `deps` on first use rather than at start (issue #9, idle memory:
 * better-auth and its plugins are ~15 MB of heap that an idle server never touches). The object
 * has better-auth's shape for what the code calls: `api.<endpoint>(…)`, `handler(request)` and
 * `$context` all return promises, so each waits for the one-time import and build (a few hundred
 * milliseconds on the first sign-in or session check after start) and then runs on the real
 * instance. `options` is only there once loaded; read `(await auth.$context).options` instead.
 * A failing import or build rejects that call and is retried by the next one.
 */
export function createAuth(deps: AuthDeps): Auth {
  let loading: Promise<Auth> | undefined;
  const load = (): Promise<Auth> => {
    loading ??= import('./better-auth.ts').then(
      (module) => module.createAuth(deps),
      (error: unknown) => {
        loading = undefined;
        throw error;
      },
    );
    return loading;
  };
  const api = new Proxy(
    {},
    {
      get: (_target, name) => {
        if (typeof name !== 'string' || name === 'then') return undefined;
        return async (...args: unknown[]) => {
          const endpoints = (await load()).api as unknown as Record<string, (...a: unknown[]) => unknown>;
          const endpoint = endpoints[name];
          if (typeof endpoint !== 'function')
            throw new TypeError(`better-auth has no API endpoint "${name}"`);
          return endpoint(...args);
        };
      },
    },
  );
  const lazy = {
    api,
    handler: async (request: Request) => (await load()).handler(request),
    get $context() {
      return load().then((auth) => auth.$context);
    },
    get options(): never {
      throw new Error('better-auth is loaded on first use: read (await auth.$context).options');
    },
  };
  return lazy as unknown as Auth;
}
