/**
 * The order test files start in. A fresh clone (CI) has no vitest results cache, and vitest then
 * starts the largest files first; the fault files are small (their work is in faults/cases.ts) and
 * the longest, so they started last and left two of the three workers idle for minutes at the end
 * (docs/testing.md, "How long the tests take"). Here the files measured to take long
 * (test/integration/file-times.tsv, written by HV_TEST_TIMING) start first, longest first; every
 * other file keeps vitest's own order after them.
 */
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { BaseSequencer, type TestSpecification } from 'vitest/node';

/**
 * A file measured at this many seconds or more starts before the others. 60 rather than 90: the
 * 45–80 s files then start early too and the end of the run is left to the short ones (replaying
 * four fresh-clone runs' file times through three workers: 572–584 s against 603–614 s at 90, the
 * files' summed time over three being 565–576 s).
 */
const LONG_FILE_S = 60;

const HERE = path.dirname(fileURLToPath(import.meta.url));
const TIMES = path.join(HERE, 'integration/file-times.tsv');

/** Measured wall seconds by path relative to the repository, from the TSV HV_TEST_TIMING writes. */
function measuredSeconds(): Map<string, number> {
  const out = new Map<string, number>();
  for (const line of readFileSync(TIMES, 'utf8').split('\n')) {
    const [file, wall] = line.split('\t');
    if (file && Number.isFinite(Number(wall))) out.set(file, Number(wall));
  }
  return out;
}

export default class LongFilesFirst extends BaseSequencer {
  override async sort(files: TestSpecification[]): Promise<TestSpecification[]> {
    const ordered = await super.sort(files);
    const seconds = measuredSeconds();
    const root = path.dirname(HERE);
    const long = (f: TestSpecification) => {
      const s = seconds.get(path.relative(root, f.moduleId)) ?? 0;
      return s >= LONG_FILE_S ? s : 0;
    };
    return [...ordered].sort((a, b) => long(b) - long(a));
  }
}
