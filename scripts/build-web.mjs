/**
 * `npm run build:web`, also run by npm ci's `prepare`: generates the API types from the OpenAPI
 * document (scripts/openapi.ts) and builds the dashboard with Vite into `web/dist/`, which the API
 * process serves at `/` (server/src/http/dashboard.ts).
 *
 * The build tools are devDependencies. A production install (`npm ci --omit=dev`) has none of them:
 * then this says so and exits 0 instead of failing the install, and `/` explains that the dashboard
 * is not built (build it where the devDependencies are, then prune them: web/dist stays).
 * Plain JavaScript, so that this check runs on any Node.js: without the devDependencies the `node`
 * devDependency (Node 24, which runs the TypeScript scripts) may be missing too.
 */
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const root = path.join(path.dirname(fileURLToPath(import.meta.url)), '..');
const missing = ['vite', 'openapi-typescript', '@vitejs/plugin-react'].filter((name) => {
  try {
    import.meta.resolve(name);
    return false;
  } catch {
    return true;
  }
});
if (missing.length > 0) {
  console.warn(
    `Dashboard not built: ${missing.join(', ')} not installed (devDependencies; npm ci without --omit=dev).`,
  );
  process.exit(0);
}
await import('./openapi.ts');
const { build } = await import('vite');
await build({ configFile: path.join(root, 'web/vite.config.ts') });
