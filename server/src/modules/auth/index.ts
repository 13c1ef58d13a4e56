/** The auth module's public face: better-auth, its routes, the session guard and first-run setup. */
export { authRoutes } from './auth.routes.ts';
export { type Auth, createAuth } from './better-auth.ts';
export { requireSession } from './require-session.ts';
export { isSetupRequired, printSetupUrlIfNeeded, resolveSetupToken, setupUrl } from './setup-token.ts';
