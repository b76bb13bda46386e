import { defineConfig } from 'vitest/config';

// Unit tests need no root and run in parallel; integration tests drive real
// block devices and daemons, so they get longer timeouts and fewer workers.
export default defineConfig({
  test: {
    projects: [
      {
        test: {
          name: 'unit',
          include: ['test/unit/**/*.test.ts'],
          testTimeout: 20_000,
        },
      },
      {
        test: {
          name: 'integration',
          include: ['test/integration/**/*.test.ts'],
          testTimeout: 180_000,
          hookTimeout: 120_000,
          pool: 'forks',
          poolOptions: { forks: { maxForks: 2, minForks: 1 } },
        },
      },
    ],
  },
});
