import { execFile } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { describe, expect, it } from 'vitest';

/**
 * The import-boundary check `npm run lint` runs (.dependency-cruiser.cjs, issue #9 "Dependencies
 * point one way"). The fixture holds one violation of each rule, so a rule that stops matching
 * (a regex typo, a renamed folder) fails here instead of passing silently.
 */
const repoRoot = fileURLToPath(new URL('../..', import.meta.url));
const fixtureRoot = fileURLToPath(new URL('./fixtures/import-boundaries', import.meta.url));
const depcruise = fileURLToPath(
  new URL('../../node_modules/dependency-cruiser/bin/dependency-cruiser.mjs', import.meta.url),
);
const config = fileURLToPath(new URL('../../.dependency-cruiser.cjs', import.meta.url));

/** The violations `depcruise server/src` reports when run in `cwd`, as "rule: from -> to". */
async function violationsIn(cwd: string): Promise<string[]> {
  const args = [depcruise, 'server/src', '--config', config, '--output-type', 'json'];
  // depcruise exits non-zero when it finds violations; the JSON report is on stdout either way.
  const stdout = await promisify(execFile)(process.execPath, args, { cwd, maxBuffer: 64 << 20 }).then(
    (result) => result.stdout,
    (error: { stdout?: string }) => error.stdout ?? '',
  );
  const report = JSON.parse(stdout) as {
    summary: { violations: { rule: { name: string }; from: string; to: string }[] };
  };
  return report.summary.violations.map((v) => `${v.rule.name}: ${v.from} -> ${v.to}`).sort();
}

describe('import boundaries (dependency-cruiser)', () => {
  it('reports each kind of violation in the fixture', async () => {
    expect(await violationsIn(fixtureRoot)).toEqual([
      'composition-root-on-top: server/src/modules/auth/internal.ts -> server/src/app.ts',
      'infrastructure-not-to-modules: server/src/http/guard.ts -> server/src/modules/teams/index.ts',
      'module-through-index: server/src/modules/teams/teams.ts -> server/src/modules/auth/internal.ts',
      'no-circular-folders: server/src/modules/auth -> server/src/modules/teams',
      'no-circular-folders: server/src/modules/teams -> server/src/modules/auth',
      'no-circular: server/src/jobs/a.ts -> server/src/jobs/b.ts',
    ]);
  });

  it('finds none in the server', async () => {
    expect(await violationsIn(repoRoot)).toEqual([]);
  });
});
