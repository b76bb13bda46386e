/**
 * Where the automatic install keeps the install ISO: in RAM (/run, tmpfs), as Harvester did until
 * a PXE install on a machine with little memory failed on a full tmpfs (harvester-installer PR
 * #221, which moved the download onto the target's COS_PERSISTENT), or streamed to COS_PERSISTENT.
 * Streaming means: before any disk is touched only the ISO's directory and the parts the plan needs
 * (the root filesystem image and harvester-release.yaml) are fetched into RAM, by byte range; once
 * COS_PERSISTENT exists the whole ISO is read once, in order, through a sha256 and the image bundle
 * is written straight to its place there. Pure.
 */

/** What the live system needs besides the ISO while installing (the installer, unpacked images, page cache). */
export const RAM_HEADROOM_BYTES = 1024 * 1024 * 1024;

export type IsoPlacement = { where: 'ram' | 'persistent'; why: string };

const GiB = (n: number): string => `${(n / 1024 ** 3).toFixed(1)} GiB`;

/** MemAvailable of /proc/meminfo, in bytes. */
export function parseMemAvailable(meminfo: string): number | undefined {
  const kb = /^MemAvailable:\s+(\d+)\s+kB/m.exec(meminfo)?.[1];
  return kb === undefined ? undefined : Number(kb) * 1024;
}

export function decideIsoPlacement(f: { isoBytes?: number; memAvailableBytes?: number; acceptsRanges: boolean; forced?: boolean }): IsoPlacement {
  if (f.forced) {
    if (!f.acceptsRanges) return { where: 'ram', why: '--iso-to-disk asks to stream the ISO to COS_PERSISTENT, but the server does not serve byte ranges: it goes to RAM' };
    return { where: 'persistent', why: '--iso-to-disk: the ISO is streamed to COS_PERSISTENT' };
  }
  if (f.isoBytes === undefined || f.memAvailableBytes === undefined) {
    return { where: 'ram', why: `the ${f.isoBytes === undefined ? "ISO's size (no Content-Length)" : 'free RAM (no MemAvailable)'} is unknown: the ISO goes to RAM as in Harvester` };
  }
  const need = f.isoBytes + RAM_HEADROOM_BYTES;
  if (need <= f.memAvailableBytes) return { where: 'ram', why: `the ISO (${GiB(f.isoBytes)}) fits in the ${GiB(f.memAvailableBytes)} of free RAM` };
  if (!f.acceptsRanges) {
    return { where: 'ram', why: `the ISO (${GiB(f.isoBytes)}) needs ${GiB(need)} of the ${GiB(f.memAvailableBytes)} free RAM, and the server does not serve byte ranges, so it cannot be streamed: trying RAM anyway` };
  }
  return { where: 'persistent', why: `the ISO (${GiB(f.isoBytes)}) does not fit in the ${GiB(f.memAvailableBytes)} of free RAM (${GiB(RAM_HEADROOM_BYTES)} kept for the installer): it is streamed to COS_PERSISTENT` };
}

/** When even the parts fetched before the disk is touched do not fit: the install cannot go on. */
export function partsProblem(partsBytes: number, memAvailableBytes: number | undefined): string | undefined {
  if (memAvailableBytes === undefined || partsBytes + RAM_HEADROOM_BYTES <= memAvailableBytes) return undefined;
  return `even the ISO's root filesystem image (${GiB(partsBytes)}) does not fit in the ${GiB(memAvailableBytes)} of free RAM (${GiB(RAM_HEADROOM_BYTES)} kept for the installer)`;
}

/** One extent of a file in the ISO: `blocks` 2048-byte blocks from `lba`. */
export interface IsoExtent {
  lba: number;
  blocks: number;
}

export interface IsoFile {
  path: string;
  size: number;
  /** In file order (ISO 9660 splits files over 4 GiB into several extents). */
  extents: IsoExtent[];
}

export const ISO_BLOCK = 2048;

/**
 * `xorriso -find / -type f -exec report_lba --` output: "File data lba: XT , LBA , BLOCKS , SIZE , 'PATH'",
 * one line per extent, XT counting a file's extents from 0. For a file split into extents the SIZE
 * column repeats the file's size on every line (or gives each extent's: both are read right). Pure.
 */
export function parseReportLba(text: string): Map<string, IsoFile> {
  const sizes = new Map<string, number[]>();
  const files = new Map<string, IsoFile>();
  for (const line of text.split('\n')) {
    const m = /^File data lba:\s*(\d+)\s*,\s*(\d+)\s*,\s*(\d+)\s*,\s*(\d+)\s*,\s*'(.*)'\s*$/.exec(line);
    if (!m) continue;
    const p = m[5]!.replace(/'"'"'/g, "'");
    const f = files.get(p) ?? { path: p, size: 0, extents: [] };
    f.extents[Number(m[1])] = { lba: Number(m[2]), blocks: Number(m[3]) };
    files.set(p, f);
    sizes.set(p, [...(sizes.get(p) ?? []), Number(m[4])]);
  }
  for (const [p, f] of files) {
    const s = sizes.get(p)!;
    const room = f.extents.reduce((n, e) => n + e.blocks * ISO_BLOCK, 0);
    const repeated = s.every((x) => x === s[0]) && s[0]! <= room && (s.length === 1 || s[0]! > (f.extents[0]?.blocks ?? 0) * ISO_BLOCK);
    f.size = repeated ? s[0]! : s.reduce((a, b) => a + b, 0);
  }
  return files;
}

/** The byte ranges of a file in the ISO, in file order: [start, end) with the last extent cut to the size. */
export function fileRanges(f: IsoFile): Array<{ start: number; end: number; fileOffset: number }> {
  const out: Array<{ start: number; end: number; fileOffset: number }> = [];
  let fileOffset = 0;
  for (const e of f.extents) {
    const len = Math.min(e.blocks * ISO_BLOCK, f.size - fileOffset);
    if (len <= 0) break;
    out.push({ start: e.lba * ISO_BLOCK, end: e.lba * ISO_BLOCK + len, fileOffset });
    fileOffset += len;
  }
  return out;
}

/** One entry of the ISO's Rock Ridge tree, as `xorriso -find DIR -exec lsdl --` lists it. */
export interface IsoEntry {
  path: string;
  kind: 'dir' | 'file' | 'symlink';
  /** Permission bits (with setuid/setgid/sticky). */
  mode: number;
  /** A symlink's target. */
  target?: string;
}

/** xorriso quotes a path in '…', an embedded ' as '"'"'. */
const QUOTED = `'((?:[^']|'"'"')*)'`;
const unquote = (s: string): string => s.replace(/'"'"'/g, "'");

function modeOf(perm: string): number {
  let m = 0;
  const bit = (c: string, on: number) => (c !== '-' ? on : 0);
  m |= bit(perm[0]!, 0o400) | bit(perm[1]!, 0o200) | bit(perm[3]!, 0o40) | bit(perm[4]!, 0o20) | bit(perm[6]!, 0o4) | bit(perm[7]!, 0o2);
  const x = (c: string, on: number, special: number, upper: string, lower: string) => (c === lower ? on | special : c === upper ? special : c === 'x' ? on : 0);
  m |= x(perm[2]!, 0o100, 0o4000, 'S', 's') | x(perm[5]!, 0o10, 0o2000, 'S', 's') | x(perm[8]!, 0o1, 0o1000, 'T', 't');
  return m;
}

/**
 * `xorriso -find DIR -exec lsdl --` output ("drwxr-xr-x 1 0 0 0 Dec  1 13:10 '/bundle'", a symlink
 * followed by "-> 'TARGET'"): what the copy needs to give the bundle the modes and links it has on
 * the ISO. Entries of other kinds (devices, fifos) are returned as nothing: a bundle has none. Pure.
 */
export function parseLsdl(text: string): IsoEntry[] {
  const out: IsoEntry[] = [];
  const re = new RegExp(`^([-dl])([-rwxsStT]{9})\\s.*?\\s${QUOTED}(?:\\s->\\s${QUOTED})?\\s*$`);
  for (const line of text.split('\n')) {
    const m = re.exec(line);
    if (!m) continue;
    const kind = m[1] === 'd' ? 'dir' : m[1] === 'l' ? 'symlink' : 'file';
    const e: IsoEntry = { path: unquote(m[3]!), kind, mode: modeOf(m[2]!) };
    if (kind === 'symlink') e.target = unquote(m[4] ?? '');
    out.push(e);
  }
  return out;
}
