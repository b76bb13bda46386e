/**
 * Disk selectors (`install.device_selector`, `install.data_disk_selector`): a rule that chooses a disk
 * from the machine's facts at install time, for fleets where `/dev/sdX` and even by-path move with a
 * RAID controller's ordering of logical drives (harvester/harvester#8687, #5579, #6909, #9031; Talos
 * has `installDiskSelector`). The one home of what a selector means: its sizes, its globs, each
 * criterion in words, the tie-break, and the rules a config's selectors must follow. Which disks may
 * be candidates at all (never the boot medium, never a disk in use) is the machine's business:
 * installer/preflight/disk-select.ts. Pure.
 */
import type { FindingList } from './findings.js';
import type { DiskSelector, HarvesterConfig } from './types.js';

/** The two selectors, the plain key each stands in for, and how docs and messages name them. */
export const SELECTOR_ROLES = {
  device: { selector: 'deviceSelector', plain: 'device', key: 'install.device_selector', plainKey: 'install.device', title: 'install disk' },
  dataDisk: { selector: 'dataDiskSelector', plain: 'dataDisk', key: 'install.data_disk_selector', plainKey: 'install.data_disk', title: 'data disk' },
} as const;
export type SelectorRole = keyof typeof SELECTOR_ROLES;

/** What a criterion looks at: a disk as preflight saw it. */
export interface SelectorSubject {
  path: string;
  sizeBytes: number;
  model?: string;
  vendor?: string;
  serial?: string;
  transport: string;
  rotational: boolean;
  /** The disk's /dev/disk/by-path names (without the directory). */
  byPath: string[];
}

const UNITS: Record<string, number> = {
  '': 1,
  B: 1,
  KB: 1e3,
  MB: 1e6,
  GB: 1e9,
  TB: 1e12,
  PB: 1e15,
  Ki: 2 ** 10,
  Mi: 2 ** 20,
  Gi: 2 ** 30,
  Ti: 2 ** 40,
  Pi: 2 ** 50,
};

/** `500GB` (decimal, as disks are sold), `465Gi`/`465GiB` (binary), `1.92TB`, or plain bytes. */
export function parseDiskSize(text: string): number | undefined {
  const m = /^([0-9]+(?:\.[0-9]+)?)(?:(B|[KMGTP]B)|([KMGTP]i)B?)?$/.exec(text.trim());
  if (!m) return undefined;
  return Math.round(Number(m[1]) * UNITS[m[2] ?? m[3] ?? '']!);
}

/** Decimal, as a disk's label says: `960 GB`, `1.6 TB`, `32 GB`. */
export function formatDiskSize(bytes: number): string {
  const [unit, scale] = bytes >= 1e12 ? ['TB', 1e12] : bytes >= 1e9 ? ['GB', 1e9] : ['MB', 1e6];
  const n = bytes / (scale as number);
  return `${Number(n >= 100 ? n.toFixed(0) : n.toPrecision(3))} ${unit as string}`;
}

/** A glob (`*` any run, `?` one character) as an anchored, case-insensitive expression. */
export function globRegExp(glob: string): RegExp {
  const body = [...glob.trim()].map((c) => (c === '*' ? '.*' : c === '?' ? '.' : c.replace(/[.+^${}()|[\]\\]/g, '\\$&'))).join('');
  return new RegExp(`^${body}$`, 'i');
}

function globMiss(what: string, glob: string | undefined, value: string | undefined): string | undefined {
  if (glob === undefined) return undefined;
  if (value === undefined || value.trim() === '') return `${what} unknown (wanted ${glob})`;
  return globRegExp(glob).test(value.trim()) ? undefined : `${what} ${JSON.stringify(value.trim())} is not ${glob}`;
}

function sizeMiss(sel: DiskSelector, bytes: number): string | undefined {
  const min = sel.minSize !== undefined ? parseDiskSize(sel.minSize) : undefined;
  const max = sel.maxSize !== undefined ? parseDiskSize(sel.maxSize) : undefined;
  if (min !== undefined && bytes < min) return `${formatDiskSize(bytes)} is below min_size ${sel.minSize}`;
  if (max !== undefined && bytes > max) return `${formatDiskSize(bytes)} is above max_size ${sel.maxSize}`;
  return undefined;
}

function byPathMiss(prefix: string | undefined, names: string[]): string | undefined {
  if (prefix === undefined) return undefined;
  const want = prefix.trim().replace(/^\/dev\/disk\/by-path\//, '');
  if (names.some((n) => n.startsWith(want))) return undefined;
  return names.length ? `by-path ${names.join(', ')} does not start with ${want}` : `no by-path name (wanted ${want}…)`;
}

/** Every criterion of the selector the disk does not meet, in words; empty when it matches. */
export function selectorMisses(sel: DiskSelector, d: SelectorSubject): string[] {
  const misses = [
    sizeMiss(sel, d.sizeBytes),
    globMiss('model', sel.model, d.model),
    globMiss('vendor', sel.vendor, d.vendor),
    sel.serial !== undefined && sel.serial.trim().toLowerCase() !== (d.serial ?? '').trim().toLowerCase() ? `serial ${d.serial ? JSON.stringify(d.serial) : 'unknown'} is not ${sel.serial}` : undefined,
    sel.transport !== undefined && sel.transport !== d.transport ? `transport ${d.transport}, not ${sel.transport}` : undefined,
    sel.rotational !== undefined && sel.rotational !== d.rotational ? (d.rotational ? 'rotational (a spinning disk), not flash' : 'flash, not rotational') : undefined,
    byPathMiss(sel.byPathPrefix, d.byPath),
  ];
  return misses.filter((m): m is string => m !== undefined);
}

/** The selector in one line, for plans and messages: `transport nvme, 400GB..600GB, tie-break largest`. */
export function describeSelector(sel: DiskSelector): string {
  const parts: string[] = [];
  if (sel.minSize !== undefined || sel.maxSize !== undefined) parts.push(`size ${sel.minSize ?? '0'}..${sel.maxSize ?? 'any'}`);
  if (sel.model !== undefined) parts.push(`model ${sel.model}`);
  if (sel.vendor !== undefined) parts.push(`vendor ${sel.vendor}`);
  if (sel.serial !== undefined) parts.push(`serial ${sel.serial}`);
  if (sel.transport !== undefined) parts.push(`transport ${sel.transport}`);
  if (sel.rotational !== undefined) parts.push(sel.rotational ? 'rotational' : 'not rotational');
  if (sel.byPathPrefix !== undefined) parts.push(`by-path ${sel.byPathPrefix}…`);
  if (sel.tieBreak !== undefined) parts.push(`tie-break ${sel.tieBreak}`);
  return parts.join(', ');
}

export interface TieBreakOutcome<T extends SelectorSubject> {
  chosen?: T;
  /** Matches the tie-break set aside, each with why. */
  setAside: Array<{ disk: T; why: string }>;
  /** Matches still level after the tie-break (two or more: refuse). */
  level: T[];
}

/** The first by-path name, for ordering; disks without one sort last. */
function firstByPath(d: SelectorSubject): string {
  return [...d.byPath].sort()[0] ?? '\uffff';
}

/**
 * Picks one of several matches. Without a tie-break, or when the best are level (two identical
 * logical drives under `largest`), nothing is chosen: a guess here could wipe the wrong disk.
 */
export function applyTieBreak<T extends SelectorSubject>(tieBreak: string | undefined, matches: T[]): TieBreakOutcome<T> {
  if (matches.length === 1) return { chosen: matches[0], setAside: [], level: [] };
  if (matches.length === 0 || tieBreak === undefined) return { setAside: [], level: matches };
  const key = (d: T): string | number => (tieBreak === 'first_by_path' ? firstByPath(d) : tieBreak === 'largest' ? -d.sizeBytes : d.sizeBytes);
  const best = matches.reduce((a, b) => (key(b) < key(a) ? b : a));
  const level = matches.filter((d) => key(d) === key(best));
  const why = (d: T): string =>
    tieBreak === 'first_by_path' ? `tie-break first_by_path: ${d.byPath.length ? firstByPath(d) : 'no by-path name'} is not first` : `tie-break ${tieBreak}: ${formatDiskSize(d.sizeBytes)} vs ${formatDiskSize(best.sizeBytes)}`;
  const setAside = matches.filter((d) => !level.includes(d)).map((disk) => ({ disk, why: why(disk) }));
  return level.length === 1 ? { chosen: level[0], setAside, level: [] } : { setAside, level };
}

/**
 * The config's selectors: one way to name each disk, sizes in order. (An empty selector or an empty
 * glob never gets here: the loader drops empty values as Harvester drops Go zero values, and the
 * missing disk is reported as Harvester's "no device specified". A tie-break alone is a rule: "the
 * biggest disk".)
 */
export function checkDiskSelectors(cfg: HarvesterConfig, out: FindingList): void {
  const install = cfg.install ?? {};
  for (const role of Object.values(SELECTOR_ROLES)) {
    const sel = install[role.selector];
    if (!sel) continue;
    const ptr = `/install/${role.selector}`;
    if (install[role.plain]) out.error(ptr, `${role.plainKey} and ${role.key} both name the ${role.title}`, `keep one: the path, or the rule`);
    const min = sel.minSize !== undefined ? parseDiskSize(sel.minSize) : undefined;
    const max = sel.maxSize !== undefined ? parseDiskSize(sel.maxSize) : undefined;
    if (min !== undefined && max !== undefined && min > max) out.error(`${ptr}/minSize`, `min_size ${sel.minSize} is above max_size ${sel.maxSize}: no disk can match`, 'swap them');
  }
  if (install.role === 'witness' && install.dataDiskSelector) {
    out.warn('/install/dataDiskSelector', 'a witness node gets no data disk: data_disk_selector is ignored', 'remove it for the witness role');
  }
}

/**
 * Merging: a disk named in the higher-priority source, by path or by rule, replaces how the lower
 * one names it (a path on the command line over a file's rule is that path; a rule over a file's
 * path is that rule), so a merge never holds both. `merged` is changed in place.
 */
export function keepOneDiskName(high: HarvesterConfig, merged: HarvesterConfig): void {
  const install = merged.install;
  if (!install) return;
  for (const role of Object.values(SELECTOR_ROLES)) {
    if (high.install?.[role.plain]) {
      if (!high.install[role.selector]) delete install[role.selector];
    } else if (high.install?.[role.selector]) delete install[role.plain];
  }
}

/** The config with both disks named by path (what /oem/harvester.config records), the selectors gone. */
export function withResolvedDisks(cfg: HarvesterConfig, paths: { device?: string; dataDisk?: string }): HarvesterConfig {
  const install = { ...cfg.install };
  for (const role of Object.values(SELECTOR_ROLES)) {
    const p = paths[role.plain];
    if (!install[role.selector]) continue;
    delete install[role.selector];
    if (p) install[role.plain] = p;
  }
  return { ...cfg, install };
}
