import { defineConfig } from 'vitest/config';

// Stryker's test run (`make mutation`): the unit tests only (no root), one worker per mutant run.
export default defineConfig({
  test: {
    include: ['test/unit/**/*.test.ts'],
    // Preflight reads the sysfs-like fixture trees, which the mutation sandbox leaves out.
    exclude: ['test/unit/preflight/**', '**/node_modules/**'],
    testTimeout: 60_000,
  },
});
