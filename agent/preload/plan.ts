/** Pure decisions: which archives to import, in which order, and what is still missing. */
import type { BundleArchive } from './bundle.js';

export interface ArchivePlan {
  archive: BundleArchive;
  action: 'import' | 'skip';
  /** Why, for the log: "3 of 12 images missing", "all 12 images present", "no image list". */
  reason: string;
  /** Listed images not present yet. */
  missing: string[];
}

/** Skip an archive only when it has a list and every image on it is present already. */
export function planImports(archives: readonly BundleArchive[], present: ReadonlySet<string>): ArchivePlan[] {
  return archives.map((archive) => {
    if (archive.images.length === 0) {
      return { archive, action: 'import', reason: 'no image list: cannot tell what it holds', missing: [] };
    }
    const missing = archive.images.filter((i) => !present.has(i));
    if (missing.length === 0) {
      return { archive, action: 'skip', reason: `all ${archive.images.length} listed images present`, missing };
    }
    return { archive, action: 'import', reason: `${missing.length} of ${archive.images.length} listed images missing`, missing };
  });
}

/**
 * Largest archive first, so that with a bounded pool the long imports start early and the small
 * ones fill the gaps (the total time is then close to the longest single import). Archives of
 * unknown size (a FIFO, a device) go last, in bundle order.
 */
export function importOrder(plans: readonly ArchivePlan[]): BundleArchive[] {
  // Array.prototype.sort is stable (ES2019): equal sizes keep bundle order.
  return plans
    .filter((p) => p.action === 'import')
    .map((p) => p.archive)
    .sort((x, y) => (y.sizeBytes ?? -1) - (x.sizeBytes ?? -1));
}

export interface MissingImage {
  image: string;
  archive: string;
}

/** Every listed image not in `present`, with the archive that should have brought it. */
export function findMissing(archives: readonly BundleArchive[], present: ReadonlySet<string>): MissingImage[] {
  const out: MissingImage[] = [];
  const seen = new Set<string>();
  for (const a of archives) {
    for (const image of a.images) {
      if (present.has(image) || seen.has(image)) continue;
      seen.add(image);
      out.push({ image, archive: a.id });
    }
  }
  return out;
}

/**
 * After a failed attempt (checksum mismatch, killed mid-import): the images of this archive that
 * appeared during the attempt are not trusted and are removed — except those that were present
 * before it or that another archive, already imported successfully, also lists.
 */
export function imagesToRollBack(
  failed: BundleArchive,
  before: ReadonlySet<string>,
  after: ReadonlySet<string>,
  vouchedFor: ReadonlySet<string>,
): string[] {
  return failed.images.filter((i) => after.has(i) && !before.has(i) && !vouchedFor.has(i));
}
