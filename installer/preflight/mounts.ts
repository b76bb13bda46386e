/** Parsers for /proc/self/mountinfo and /proc/swaps: which block devices are in use right now. */

export interface MountEntry {
  /** major:minor of the mounted device (0:N for virtual filesystems). */
  devno: string;
  mountpoint: string;
  fsType: string;
  source: string;
}

/** Unescapes the octal escapes the kernel uses for spaces and tabs in mount paths. */
function unescapeMountPath(s: string): string {
  return s.replace(/\\([0-7]{3})/g, (_, o: string) => String.fromCharCode(Number.parseInt(o, 8)));
}

/** Parses /proc/self/mountinfo (`id parent major:minor root mountpoint opts [optional...] - fstype source superopts`). */
export function parseMountinfo(text: string): MountEntry[] {
  const out: MountEntry[] = [];
  for (const line of text.split('\n')) {
    if (!line.trim()) continue;
    const sep = line.indexOf(' - ');
    if (sep < 0) continue;
    const left = line.slice(0, sep).split(' ');
    const right = line.slice(sep + 3).split(' ');
    if (left.length < 5 || right.length < 2) continue;
    out.push({ devno: left[2], mountpoint: unescapeMountPath(left[4]), fsType: right[0], source: unescapeMountPath(right[1]) });
  }
  return out;
}

/** Parses /proc/mounts (fallback when mountinfo is missing): no device numbers, only source paths. */
export function parseProcMounts(text: string): MountEntry[] {
  const out: MountEntry[] = [];
  for (const line of text.split('\n')) {
    const f = line.trim().split(/\s+/);
    if (f.length < 3) continue;
    out.push({ devno: '', source: unescapeMountPath(f[0]), mountpoint: unescapeMountPath(f[1]), fsType: f[2] });
  }
  return out;
}

/** Paths of active swap devices/files from /proc/swaps. */
export function parseSwaps(text: string): string[] {
  return text
    .split('\n')
    .slice(1)
    .map((l) => l.trim().split(/\s+/)[0])
    .filter((p): p is string => !!p)
    .map(unescapeMountPath);
}
