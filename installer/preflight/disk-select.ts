/**
 * Resolving `install.device_selector` and `install.data_disk_selector` against this machine's disks
 * (config/disk-selector.ts says what a selector means). A disk is a candidate only when an install
 * could take it without destroying something in use: never the boot medium, never a disk with a
 * mounted, swapping or held partition, never a read-only or optical device or a loop file, and the
 * data disk never the install disk. No match, or several after the tie-break, refuses, and every
 * disk is listed with why it was or was not taken. Pure.
 */
import {
  applyTieBreak,
  describeSelector,
  formatDiskSize,
  SELECTOR_ROLES,
  selectorMisses,
  withResolvedDisks,
  type SelectorRole,
  type SelectorSubject,
} from '../../config/disk-selector.js';
import type { DiskSelector, HarvesterConfig } from '../../config/types.js';
import type { DiskFacts, MachineFacts } from './types.js';

export interface CandidateVerdict {
  path: string;
  /** size, transport, model: what an operator recognises the disk by. */
  summary: string;
  taken: boolean;
  why: string;
}

export interface DiskChoice {
  role: SelectorRole;
  /** `install.device_selector`. */
  key: string;
  rule: string;
  /** The disk taken, by machine path; absent when the rule refused. */
  path?: string;
  /** The name recorded in the config (/oem/harvester.config): a stable by-id link where there is one. */
  recorded?: string;
  candidates: CandidateVerdict[];
  /** Why nothing was taken, for the refusal. */
  problem?: string;
}

export interface DiskSelection {
  /** The config with the chosen disks as plain paths and no selectors (unchanged when it has none). */
  config: HarvesterConfig;
  choices: DiskChoice[];
}

function subjectOf(d: DiskFacts): SelectorSubject & { disk: DiskFacts } {
  const byPath = d.links.filter((l) => l.startsWith('/dev/disk/by-path/')).map((l) => l.slice('/dev/disk/by-path/'.length));
  return { disk: d, path: d.path, sizeBytes: d.sizeBytes, model: d.model, vendor: d.vendor, serial: d.serial, transport: d.transport, rotational: d.rotational, byPath };
}

function summaryOf(d: DiskFacts): string {
  return [formatDiskSize(d.sizeBytes), d.transport, d.rotational ? 'rotational' : undefined, d.vendor && d.vendor !== 'ATA' ? d.vendor : undefined, d.model, d.serial ? `serial ${d.serial}` : undefined]
    .filter(Boolean)
    .join(', ');
}

/** Why an install may never take this disk, whatever the rule says; undefined when it may. */
export function unavailableBecause(d: DiskFacts): string | undefined {
  if (d.inUse.bootMedium) return 'the boot medium';
  if (d.transport === 'loop') return 'a loop device (a file, not a disk)';
  if (/^sr/.test(d.name)) return 'an optical drive';
  if (d.readOnly) return 'read-only';
  if (d.inUse.mountpoints.length) return `mounted at ${d.inUse.mountpoints.join(', ')}`;
  if (d.inUse.swap) return 'holds active swap';
  if (d.inUse.holders.length) return `held by ${d.inUse.holders.join(', ')} (LVM, MD or device-mapper)`;
  if (d.sizeBytes <= 0) return 'empty (no medium)';
  return undefined;
}

/**
 * The name a config records for a disk: its first /dev/disk/by-id link that a person can read (not
 * the wwn-/nvme-eui. number), else any by-id link, else its /dev path; stable across boots.
 */
export function stableNameOf(d: DiskFacts): string {
  const byId = d.links.filter((l) => l.startsWith('/dev/disk/by-id/'));
  return byId.find((l) => !/\/(wwn|nvme-eui)/.test(l)) ?? byId[0] ?? d.path;
}

/** One selector over the machine's disks; `taken` holds the disks already chosen for another role. */
export function chooseDisk(role: SelectorRole, sel: DiskSelector, facts: MachineFacts, taken: Map<string, string> = new Map()): DiskChoice {
  const key = SELECTOR_ROLES[role].key;
  const verdicts = new Map<string, CandidateVerdict>();
  const matches: Array<ReturnType<typeof subjectOf>> = [];
  for (const d of [...facts.disks].sort((a, b) => a.path.localeCompare(b.path))) {
    const no = taken.get(d.path) ?? unavailableBecause(d);
    const misses = no ? [] : selectorMisses(sel, subjectOf(d));
    const why = no ?? (misses.length ? misses.join('; ') : 'matches');
    verdicts.set(d.path, { path: d.path, summary: summaryOf(d), taken: false, why });
    if (!no && misses.length === 0) matches.push(subjectOf(d));
  }
  const outcome = applyTieBreak(sel.tieBreak, matches);
  for (const { disk, why } of outcome.setAside) verdicts.get(disk.path)!.why = why;
  const base = { role, key, rule: describeSelector(sel), candidates: [...verdicts.values()] };
  if (!outcome.chosen) {
    const problem = matches.length === 0 ? `${key} (${base.rule}) matches no disk here` : `${key} (${base.rule}) matches ${outcome.level.length} disks equally: ${outcome.level.map((d) => d.path).join(', ')}`;
    for (const d of outcome.level) verdicts.get(d.path)!.why = sel.tieBreak ? `matches, level with another under tie-break ${sel.tieBreak}` : 'matches, as another disk does (no tie_break)';
    return { ...base, problem };
  }
  const chosen = verdicts.get(outcome.chosen.path)!;
  chosen.taken = true;
  chosen.why = matches.length > 1 ? `matches; chosen by tie-break ${sel.tieBreak}` : 'the only disk that matches';
  return { ...base, path: outcome.chosen.path, recorded: stableNameOf(outcome.chosen.disk) };
}

/**
 * Both selectors of a config against the machine: the install disk first, then the data disk among
 * the rest (never the install disk, whether that was chosen by rule or named by path).
 */
export function selectDisks(config: HarvesterConfig | undefined, facts: MachineFacts, locate: (name: string) => DiskFacts | undefined): DiskSelection {
  const install = config?.install;
  if (!config || (!install?.deviceSelector && !install?.dataDiskSelector)) return { config: config ?? {}, choices: [] };
  const choices: DiskChoice[] = [];
  const taken = new Map<string, string>();
  let device = install.device;
  if (install.deviceSelector) {
    const c = chooseDisk('device', install.deviceSelector, facts);
    choices.push(c);
    device = c.recorded;
  }
  const installDisk = device ? locate(device) : undefined;
  if (installDisk) taken.set(installDisk.path, 'the install disk');
  let dataDisk = install.dataDisk;
  if (install.dataDiskSelector && install.role !== 'witness') {
    const c = chooseDisk('dataDisk', install.dataDiskSelector, facts, taken);
    choices.push(c);
    dataDisk = c.recorded;
  }
  return { config: withResolvedDisks(config, { device, dataDisk }), choices };
}

/** The refusal text: the rule, then every disk with why it was or was not taken. */
export function formatDiskChoice(c: DiskChoice): string[] {
  const head = c.path ? `${c.key} (${c.rule}): ${c.path}${c.recorded && c.recorded !== c.path ? ` (recorded as ${c.recorded})` : ''}` : (c.problem ?? c.key);
  return [head, ...c.candidates.map((v) => `  ${v.taken ? '*' : '-'} ${v.path} (${v.summary}): ${v.why}`)];
}
