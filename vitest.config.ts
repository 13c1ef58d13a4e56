import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    include: ['server/**/*.test.ts'],
    environment: 'node',
    // Chooses (or starts) the PostgreSQL and Redis of the run; see the file.
    globalSetup: ['server/test/global-setup.ts'],
    pool: 'forks',
    testTimeout: 60_000,
    hookTimeout: 120_000,
    // Integration tests each boot databases and servers; two cores run two files at a time.
    maxWorkers: 2,
  },
});
