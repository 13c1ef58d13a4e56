/**
 * Import boundaries of server/src (issue #9 "Dependencies point one way").
 * Direction: composition root (main, runtime, context, app, job-handlers) → modules → http, jobs, db,
 * providers, outbound. Modules plug into http and jobs through registration (http/access.ts
 * registerAccessGuards, jobs/registry.ts JobHandlers), wired by the composition root; the lower
 * layers never import a module, and modules reach each other only through their index.ts.
 * Run by `npm run lint`; colocated *.test.ts files are not checked.
 */
module.exports = {
  forbidden: [
    {
      name: 'no-circular',
      severity: 'error',
      comment: 'A cycle means two files (or modules) cannot be understood or tested apart.',
      from: { path: '^server/src' },
      to: { circular: true },
    },
    {
      name: 'no-circular-folders',
      severity: 'error',
      scope: 'folder',
      comment:
        'No cycle between folders either (e.g. auth → teams → auth through different files): modules and layers depend one way.',
      from: { path: '^server/src' },
      to: { circular: true },
    },
    {
      name: 'infrastructure-not-to-modules',
      severity: 'error',
      comment:
        'http, jobs, db, providers and outbound are below the modules: modules register with them, they never import a module.',
      from: { path: '^server/src/(http|jobs|db|providers|outbound)/' },
      to: { path: '^server/src/modules/' },
    },
    {
      name: 'composition-root-on-top',
      severity: 'error',
      comment:
        'main, runtime, context, app and job-handlers wire the modules together; nothing below imports them.',
      from: { path: '^server/src/(modules|http|jobs|db|providers|outbound)/' },
      to: { path: '^server/src/(main|runtime|app|context|job-handlers)\\.ts$' },
    },
    {
      name: 'module-through-index',
      severity: 'error',
      comment: 'A module imports another module only through its index.ts (its public surface).',
      from: { path: '^server/src/modules/([^/]+)/' },
      to: {
        path: '^server/src/modules/([^/]+)/',
        pathNot: ['^server/src/modules/$1/', '^server/src/modules/[^/]+/index\\.ts$'],
      },
    },
  ],
  options: {
    doNotFollow: { path: 'node_modules' },
    exclude: { path: '\\.test\\.ts$' },
    tsPreCompilationDeps: true,
    tsConfig: { fileName: 'tsconfig.json' },
    enhancedResolveOptions: {
      extensions: ['.ts', '.js'],
      conditionNames: ['import', 'require', 'node', 'default'],
    },
  },
};
