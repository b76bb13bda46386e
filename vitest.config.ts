import { readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { defineConfig } from 'vitest/config';
import LongFilesFirst from './test/sequencer.js';

// The unit files share their worker's module cache (`--no-isolate` in the Makefile: vitest 3 takes
// isolate from the command line or the root config, not from a project): a fresh module graph per
// file cost more than the tests themselves (unit wall 117–135 s isolated, 68–76 s shared in `make test`, on 2 CPUs).
// A file that replaces a module (vi.mock) must import the modules under test through its mock, so
// it is in a project of its own, run isolated; the list is read from the files, not kept by hand.
const UNIT_DIR = path.join(import.meta.dirname, 'test/unit');
const MOCKING_UNIT_FILES = (readdirSync(UNIT_DIR, { recursive: true }) as string[])
  .filter((f) => f.endsWith('.test.ts') && /\bvi\.(do)?mock\(/.test(readFileSync(path.join(UNIT_DIR, f), 'utf8')))
  .map((f) => `test/unit/${f}`);

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
          exclude: MOCKING_UNIT_FILES,
          setupFiles: ['test/file-timing.ts'],
          testTimeout: 20_000,
        },
      },
      {
        test: {
          name: 'unit-mocks',
          include: MOCKING_UNIT_FILES,
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
