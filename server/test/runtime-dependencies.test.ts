import { readFileSync } from 'node:fs';
import { readdir } from 'node:fs/promises';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';

const root = fileURLToPath(new URL('..', import.meta.url));
const pkg = JSON.parse(readFileSync(path.join(root, '../package.json'), 'utf8')) as {
  dependencies: Record<string, string>;
};

/** The package name of a bare specifier (`@scope/name/sub` → `@scope/name`, `name/sub` → `name`). */
function packageOf(specifier: string): string {
  const parts = specifier.split('/');
  return specifier.startsWith('@') ? `${parts[0]}/${parts[1]}` : parts[0]!;
}

/**
 * What the server runs must install with `npm ci --omit=dev` (a production image): every package
 * server/src imports outside its tests (static imports, `import()`, and the providers' lazyModule /
 * require loaders) is a dependency, not a devDependency. standardwebhooks, which verifies Resend's
 * event signatures at runtime, was once only a devDependency.
 */
describe('runtime dependencies', () => {
  it('lists every package server/src imports outside its tests under dependencies', async () => {
    const files = (await readdir(path.join(root, 'src'), { recursive: true }))
      .filter((file) => file.endsWith('.ts') && !file.endsWith('.test.ts'))
      .map((file) => path.join(root, 'src', file));
    expect(files.length).toBeGreaterThan(50);
    const missing = new Set<string>();
    const specifier =
      /(?:\bfrom\s+|\bimport\(\s*|lazyModule<[^>]*>\(\s*|\brequire\(\s*)['"]([^'"./][^'"]*)['"]/g;
    for (const file of files) {
      const source = readFileSync(file, 'utf8');
      for (const match of source.matchAll(specifier)) {
        const name = packageOf(match[1]!);
        if (name.startsWith('node:')) continue;
        if (!(name in pkg.dependencies)) missing.add(`${name} (${path.relative(root, file)})`);
      }
    }
    expect([...missing]).toEqual([]);
  });
});
