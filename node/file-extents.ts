import { run } from '../lib/exec.js';

/** A byte range [start, end) of a file that may hold data (anything FIEMAP reports: written, unwritten or delayed). */
export type Extent = [number, number];

/**
 * Parses `filefrag -v` output into byte ranges. Undefined when the output is not the FIEMAP table
 * we know (another filesystem, the FIBMAP fallback, an unknown version): callers then read the
 * whole file, which is always correct, only slower.
 */
export function parseFilefrag(text: string, size: number): Extent[] | undefined {
  const head = /^File size of .* is (\d+) \((\d+) blocks? of (\d+) bytes\)/m.exec(text);
  if (!head || Number(head[1]) !== size) return undefined;
  if (/: 0 extents? found\s*$/.test(text)) return []; // all holes: filefrag prints no table
  if (!/^\s*ext:\s+logical_offset:/m.test(text)) return undefined;
  const unit = Number(head[3]);
  if (!Number.isInteger(unit) || unit <= 0) return undefined;
  const extents: Extent[] = [];
  for (const line of text.split('\n')) {
    const m = /^\s*\d+:\s+(\d+)\.\.\s*(\d+):/.exec(line);
    if (!m) continue;
    const start = Number(m[1]) * unit;
    const end = Math.min((Number(m[2]) + 1) * unit, size);
    if (!(end > start)) return undefined;
    extents.push([start, end]);
  }
  return extents;
}

/**
 * The ranges of a file that hold (or may hold) data; everything else is a hole and reads as zeros.
 * Unwritten and delayed-allocation extents count as data: a page dirty in the cache over an
 * unwritten extent is data FIEMAP does not show (the trap that made cp stop trusting FIEMAP flags),
 * and only a range with no extent at all is certainly zero.
 */
export async function readDataExtents(file: string, size: number): Promise<Extent[] | undefined> {
  try {
    const r = await run('filefrag', ['-v', file], { timeoutMs: 60_000 });
    return parseFilefrag(r.stdout, size);
  } catch {
    return undefined;
  }
}
