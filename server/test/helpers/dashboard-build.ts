import { execFileSync } from 'node:child_process';
import { existsSync, readdirSync, statSync } from 'node:fs';
import path from 'node:path';
import { DASHBOARD_DIST } from '../../src/http/dashboard.ts';

/**
 * Builds the dashboard (`npm run build:web` in the repository at `root`) when `web/dist` has no
 * `index.html` or a file of `web/` is newer than it: a browser test must not drive an outdated
 * build. `npm ci`'s `prepare` builds it, so on CI this is a few `stat`s.
 */
export function buildDashboardIfStale(root: string): void {
  if (!existsSync(path.join(DASHBOARD_DIST, 'index.html')) || dashboardSourcesChanged()) {
    execFileSync('npm', ['run', 'build:web'], { cwd: root, stdio: 'inherit' });
  }
}

/** True when a file of web/ (not dist/, not the generated API types) is newer than the build. */
function dashboardSourcesChanged(): boolean {
  const built = statSync(path.join(DASHBOARD_DIST, 'index.html')).mtimeMs;
  const newer = (dir: string): boolean =>
    readdirSync(dir, { withFileTypes: true }).some((entry) => {
      const file = path.join(dir, entry.name);
      if (entry.isDirectory()) return entry.name !== 'dist' && newer(file);
      // The generated API types are rewritten by every typecheck; their source is the server.
      if (entry.name === 'openapi.json' || entry.name === 'schema.d.ts') return false;
      return statSync(file).mtimeMs > built;
    });
  return newer(path.resolve(DASHBOARD_DIST, '..'));
}
