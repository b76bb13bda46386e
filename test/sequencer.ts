/**
 * The order test files start in: longest first, so that the pool's last minutes are not one long
 * file running alone while the other workers idle (docs/testing.md, "How long the tests take").
 * A file's length is its duration in vitest's results cache (this checkout's last run) or else in
 * test/durations.json (committed, so a fresh clone gets the same order); a file in neither (a new
 * one) counts as the table's median. Files that failed last time still come first, as vitest's own
 * sequencer does. `node test/update-durations.mjs <vitest json report>` rewrites the table.
 */
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { BaseSequencer, type TestSpecification } from 'vitest/node';

const TABLE = path.join(path.dirname(fileURLToPath(import.meta.url)), 'durations.json');

function readTable(): Record<string, number> {
  try {
    return (JSON.parse(readFileSync(TABLE, 'utf8')) as { files: Record<string, number> }).files;
  } catch {
    return {};
  }
}

function median(values: number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted.length ? sorted[Math.floor(sorted.length / 2)]! : 0;
}

export default class LongestFirstSequencer extends BaseSequencer {
  override async sort(files: TestSpecification[]): Promise<TestSpecification[]> {
    const table = readTable();
    const fallback = median(Object.values(table));
    const root = this.ctx.config.root;
    const known = files.map((spec) => {
      const key = `${spec.project.name}:${path.relative(root, spec.moduleId)}`;
      const last = this.ctx.cache.getFileTestResults(key);
      return { spec, failed: last?.failed === true, ms: last?.duration ?? table[key] ?? fallback };
    });
    return known.sort((a, b) => Number(b.failed) - Number(a.failed) || b.ms - a.ms).map((k) => k.spec);
  }
}
