/** Outcomes of a preload pass and the words a person reads about them. Pure. */
import type { MissingImage } from './plan.js';

export type FailureKind =
  /** No byte moved through the import pipe for the stall timeout. */
  | 'stalled'
  /** The archive's bytes do not hash to the bundle's sha256. */
  | 'checksum-mismatch'
  /** zstd could not decompress it (corrupt or truncated). */
  | 'corrupt'
  /** Reading the archive file failed (I/O error on the medium). */
  | 'read-failed'
  /** ctr failed (containerd went away, a malformed tar, …). */
  | 'import-failed'
  /** Every byte was sent but ctr did not finish within the finish timeout. */
  | 'finish-timeout'
  /** ctr succeeded but images on the archive's list are not present. */
  | 'images-missing'
  /** containerd did not answer before an attempt. */
  | 'containerd-unavailable'
  /** The node has no zstd to decompress the archive with. */
  | 'tool-missing';

/** Failures a retry later cannot fix: the medium's bytes are wrong, or the node lacks a tool. A person must act. */
export function isPermanent(kind: FailureKind): boolean {
  return kind === 'checksum-mismatch' || kind === 'corrupt' || kind === 'images-missing' || kind === 'tool-missing';
}

export interface ArchiveFailure {
  kind: FailureKind;
  message: string;
}

export interface ArchiveOutcome {
  id: string;
  status: 'imported' | 'skipped' | 'failed';
  attempts: number;
  /** Bytes of the archive sent through the pipe in the last attempt. */
  bytes: number;
  durationMs: number;
  failure?: ArchiveFailure;
  /** Images removed again after a failed attempt (not trusted). */
  rolledBack?: string[];
}

export interface PreloadOutcome {
  bundleDir: string;
  archives: ArchiveOutcome[];
  missing: MissingImage[];
  /** Number of distinct listed images. */
  listedImages: number;
}

export function formatBytes(n: number): string {
  if (n < 1024) return `${n} B`;
  if (n < 1024 ** 2) return `${(n / 1024).toFixed(0)} KiB`;
  if (n < 1024 ** 3) return `${(n / 1024 ** 2).toFixed(n < 10 * 1024 ** 2 ? 1 : 0)} MiB`;
  return `${(n / 1024 ** 3).toFixed(2)} GiB`;
}

function plural(n: number, word: string): string {
  return `${n} ${word}${n === 1 ? '' : 's'}`;
}

/** One line for a successful pass: "6 archives: 4 imported (1.2 GiB), 2 skipped (images present); 83 listed images present". */
export function summarise(o: PreloadOutcome): string {
  const imported = o.archives.filter((a) => a.status === 'imported');
  const skipped = o.archives.filter((a) => a.status === 'skipped');
  const bytes = imported.reduce((s, a) => s + a.bytes, 0);
  const parts = [`${imported.length} imported${imported.length ? ` (${formatBytes(bytes)})` : ''}`];
  if (skipped.length) parts.push(`${skipped.length} skipped (images present)`);
  return `${plural(o.archives.length, 'archive')}: ${parts.join(', ')}; ${plural(o.listedImages, 'listed image')} present`;
}

const HINTS: Record<FailureKind, string> = {
  stalled: 'the medium stopped delivering data or containerd stopped accepting it: check the virtual media / disk (dmesg) and containerd\'s log',
  'checksum-mismatch': 'the archive on the medium is damaged: re-copy the bundle or re-write the ISO, then run `hvagent once --guard image-preload`',
  corrupt: 'the archive cannot be decompressed (corrupt or truncated): re-copy the bundle or re-write the ISO',
  'read-failed': 'reading the medium failed: check dmesg for I/O errors on the ISO / disk',
  'import-failed': 'ctr failed: check that containerd is running and its log',
  'finish-timeout': 'containerd accepted the data but did not finish: check its log and disk space',
  'images-missing': 'the archive does not hold every image its list names: the bundle is inconsistent',
  'containerd-unavailable': 'start containerd (rke2-server/rke2-agent) or fix the containerd socket setting',
  'tool-missing': 'the image has no zstd to decompress the archive (the archive itself is fine): add zstd to the image or set guards.image-preload.zstd to its path, then run `hvagent once --guard image-preload`',
};

/** The failure diagnosis: each failed archive with its reason, then every missing image. */
export function diagnose(o: PreloadOutcome): { diagnosis: string; hint: string; permanent: boolean } {
  const failed = o.archives.filter((a) => a.status === 'failed');
  const lines: string[] = [];
  if (failed.length) {
    lines.push(`${failed.length} of ${plural(o.archives.length, 'archive')} failed to import:`);
    for (const a of failed) {
      const rb = a.rolledBack?.length ? ` (removed again, not trusted: ${a.rolledBack.join(', ')})` : '';
      lines.push(`  ${a.id}: ${a.failure?.message ?? 'failed'} [after ${plural(a.attempts, 'attempt')}]${rb}`);
    }
  }
  if (o.missing.length) {
    const shown = o.missing.slice(0, 20);
    lines.push(`${o.missing.length} of ${plural(o.listedImages, 'listed image')} missing in containerd:`);
    for (const m of shown) lines.push(`  ${m.image} (from ${m.archive})`);
    if (o.missing.length > shown.length) lines.push(`  … and ${o.missing.length - shown.length} more`);
  }
  const kinds = [...new Set(failed.map((a) => a.failure?.kind).filter((k): k is FailureKind => !!k))];
  if (!kinds.length && o.missing.length) kinds.push('images-missing');
  const permanent = kinds.some(isPermanent);
  const hint = kinds.map((k) => HINTS[k]).join('; ') || 'run `hvagent once --guard image-preload` again';
  return { diagnosis: lines.join('\n'), hint, permanent };
}
