import { defineConfig } from 'vitest/config';
import LongFilesFirst from './test/sequencer.js';

// Unit tests need no root; integration tests drive real block devices and daemons, so they get
// longer timeouts. Worker counts are root options in vitest 3: a project's poolOptions are ignored,
// and the default (one worker less than the CPUs) ran every file one after another on a 2-core
// machine. An integration file keeps about three quarters of one CPU busy (the rest is waiting on
// disks, daemons and guests), so three run side by side on two CPUs (docs/testing.md, "How long
// the tests take"); no two share a loop device, a port or a network namespace. `make test` gives
// the CPU-bound unit files one worker per CPU instead (VITEST_MAX_FORKS overrides this count).
export default defineConfig({
  test: {
    poolOptions: { forks: { maxForks: 3, minForks: 1 } },
    // The files measured to take long start first, so they do not end the run alone (test/sequencer.ts).
    sequence: { sequencer: LongFilesFirst },
    projects: [
      {
        test: {
          name: 'unit',
          include: ['test/unit/**/*.test.ts'],
          setupFiles: ['test/file-timing.ts'],
          testTimeout: 20_000,
        },
      },
      {
        test: {
          name: 'integration',
          include: ['test/integration/**/*.test.ts'],
          setupFiles: ['test/file-timing.ts'],
          // The host's mounts shared while the files run, so no namespace holds another file's partition.
          globalSetup: ['test/integration/shared-mounts.ts'],
          testTimeout: 180_000,
          hookTimeout: 120_000,
          pool: 'forks',
        },
      },
    ],
  },
});
