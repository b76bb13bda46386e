/** Install disk, data disk and stale-label checks (harvester/harvester-installer pkg/console/validator.go, pkg/console/util.go, pkg/util/disk.go). Pure. */
import type { HarvesterConfig } from '../../../config/types.js';
import type { DiskFacts, MachineFacts } from '../types.js';
import type { PreflightCheck, Profile } from '../report.js';
import { locateDevice, type LocatedDevice } from '../resolve.js';
import { isInstallCandidate, suggestInstallDevice } from '../suggest.js';
import { DISK_MESSAGES, installDiskMinGiB, DATA_DISK_MIN_GIB, wholeGiB } from '../../../config/disk-sizes.js';
import { selectDisks, type DiskChoice } from '../disk-select.js';

export interface DiskCheckInput {
  facts: MachineFacts;
  config?: HarvesterConfig;
  profile: Profile;
  /** Config names already resolved through symlinks by the caller (name -> machine path). */
  aliases?: Record<string, string>;
}

export interface DiskCheckOutput {
  checks: PreflightCheck[];
  /** What the config's disk selectors chose, and why (empty without selectors). */
  diskChoices?: DiskChoice[];
  installDevice?: string;
  dataDisk?: string;
  suggestedDevice?: string;
}

type Role = 'device' | 'data-disk';
const ROLE_TITLE: Record<Role, string> = { device: 'install disk', 'data-disk': 'data disk' };
const ROLE_KEY: Record<Role, string> = { device: 'install.device', 'data-disk': 'install.data_disk' };

function locate(input: DiskCheckInput, name: string): LocatedDevice | undefined {
  return locateDevice(input.facts, name) ?? (input.aliases?.[name] ? locateDevice(input.facts, input.aliases[name]) : undefined);
}

function describeDisk(d: DiskFacts): string {
  const sectors = d.logicalSectorSize === 4096 ? '4Kn' : `${d.logicalSectorSize}/${d.physicalSectorSize}`;
  return [d.transport, `${wholeGiB(d.sizeBytes)}GiB`, d.rotational ? 'rotational' : 'solid-state', sectors, d.model]
    .filter(Boolean)
    .join(', ');
}

/** Every name the config could use for a disk: wipe lists may name it by path or by-id link. */
function namesOf(d: DiskFacts): string[] {
  return [d.path, ...d.links];
}

function wipeRequested(config: HarvesterConfig | undefined, d: DiskFacts, aliases: Record<string, string> = {}): boolean {
  const list = config?.install?.wipeDisksList ?? [];
  return list.some((n) => namesOf(d).includes(n) || namesOf(d).includes(aliases[n] ?? ''));
}

/**
 * What to name instead: only disks that could take it now (installer/preflight/suggest.ts: fixed,
 * writable, not the boot medium, nothing mounted or held, not a loop device); the rest are counted,
 * not offered (a disk mounted at / is no answer).
 */
function candidatesHint(role: Role, disks: DiskFacts[]): string {
  const usable = disks.filter(isInstallCandidate).map((d) => d.path);
  const others = disks.length - usable.length;
  const left = others ? ` (${others} other disk${others === 1 ? ' is' : 's are'} removable, USB, a loop device, the boot medium or in use)` : '';
  if (usable.length === 0) return `No disk here can take it${left || ': none was found'}.`;
  return `Set ${ROLE_KEY[role]} to one of: ${usable.join(', ')}${left}.`;
}

/** Exists, whole disk; returns the disk when both hold. */
function checkPresence(role: Role, name: string, input: DiskCheckInput, out: PreflightCheck[]): DiskFacts | undefined {
  const found = locate(input, name);
  const title = ROLE_TITLE[role];
  if (!found) {
    out.push({
      id: `${role}.exists`,
      title: `${title} exists`,
      subject: name,
      result: 'fail',
      measured: 'not found',
      threshold: 'a disk on this machine',
      message: `device not found: ${name}`,
      whatToDo: candidatesHint(role, input.facts.disks),
      skippable: false,
    });
    return undefined;
  }
  out.push({
    id: `${role}.exists`,
    title: `${title} exists`,
    subject: name,
    result: 'pass',
    measured: found.partition ? found.partition.path : found.disk.path,
    threshold: 'a disk on this machine',
    message: `${name} is ${found.partition ? found.partition.path : found.disk.path}.`,
    whatToDo: '',
    skippable: false,
  });
  if (found.partition) {
    out.push({
      id: `${role}.whole-disk`,
      title: `${title} is a whole disk`,
      subject: name,
      result: 'fail',
      measured: `partition ${found.partition.number ?? ''} of ${found.disk.path}`.replace('  ', ' '),
      threshold: 'whole disk',
      message: `${name} is a partition of ${found.disk.path}, not a whole disk: the installer partitions the whole disk.`,
      whatToDo: `Set ${ROLE_KEY[role]} to the disk itself (${found.disk.path}).`,
      skippable: false,
    });
    return undefined;
  }
  return found.disk;
}

function checkUsage(role: Role, d: DiskFacts, input: DiskCheckInput, out: PreflightCheck[]): void {
  const title = ROLE_TITLE[role];
  out.push(
    d.inUse.bootMedium
      ? {
          id: `${role}.boot-medium`,
          title: `${title} is not the boot medium`,
          subject: d.path,
          result: 'fail',
          measured: 'holds the running system (live medium or /)',
          threshold: 'not the boot medium',
          message: `${d.path} holds the medium this system booted from; installing onto it would destroy the running installer.`,
          whatToDo: `Choose another disk for ${ROLE_KEY[role]}, or boot the installer from other media (PXE, virtual media).`,
          skippable: false,
        }
      : {
          id: `${role}.boot-medium`,
          title: `${title} is not the boot medium`,
          subject: d.path,
          result: 'pass',
          measured: 'not the boot medium',
          threshold: 'not the boot medium',
          message: `${d.path} is not the boot medium.`,
          whatToDo: '',
          skippable: false,
        },
  );

  out.push({
    id: `${role}.writable`,
    title: `${title} is writable`,
    subject: d.path,
    result: d.readOnly ? 'fail' : 'pass',
    measured: d.readOnly ? 'read-only' : 'read-write',
    threshold: 'read-write',
    message: d.readOnly ? `${d.path} is read-only (write-protected or an optical drive).` : `${d.path} is writable.`,
    whatToDo: d.readOnly ? 'Choose a writable disk, or clear the write protection (blockdev --setrw, the switch on the medium).' : '',
    skippable: false,
  });

  const uses = [...d.inUse.mountpoints.map((m) => `mounted at ${m}`), ...(d.inUse.swap ? ['active swap'] : [])];
  out.push({
    id: `${role}.not-mounted`,
    title: `${title} is not in use`,
    subject: d.path,
    result: uses.length ? 'fail' : 'pass',
    measured: uses.length ? uses.join(', ') : 'not mounted, no swap',
    threshold: 'not mounted, no swap',
    message: uses.length ? `${d.path} is in use: ${uses.join(', ')}.` : `${d.path} is not mounted and holds no active swap.`,
    whatToDo: uses.length ? `Unmount it (umount${d.inUse.swap ? ', swapoff' : ''}) or choose another disk.` : '',
    skippable: false,
  });

  const holders = d.inUse.holders;
  const wipe = input.config?.install?.wipeAllDisks === true || wipeRequested(input.config, d, input.aliases);
  out.push({
    id: `${role}.holders`,
    title: `${title} not held by LVM/MD/dm`,
    subject: d.path,
    result: holders.length === 0 ? 'pass' : wipe ? 'warn' : 'fail',
    measured: holders.length ? `held by ${holders.join(', ')}` : 'no holders',
    threshold: 'no holders',
    message:
      holders.length === 0
        ? `${d.path} is not held by LVM, MD RAID or device-mapper.`
        : `${d.path} is held by ${holders.join(', ')} (LVM, MD RAID or device-mapper)${wipe ? '; the config asks to wipe it' : ''}.`,
    whatToDo:
      holders.length === 0
        ? ''
        : `Release the holders before the install (vgchange -an VG, mdadm --stop /dev/mdN, dmsetup remove NAME)${wipe ? '' : `, or list ${d.path} in install.wipe_disks_list`}.`,
    skippable: false,
  });
}

function checkMedia(role: Role, d: DiskFacts, profile: Profile, out: PreflightCheck[]): void {
  const title = ROLE_TITLE[role];
  const slow = d.rotational || d.transport === 'usb';
  const warn = role === 'data-disk' && slow && profile === 'production';
  out.push({
    id: `${role}.media`,
    title: `${title} media`,
    subject: d.path,
    result: warn ? 'warn' : 'pass',
    measured: describeDisk(d),
    threshold: role === 'data-disk' && profile === 'production' ? 'solid-state, not USB' : '',
    message: warn
      ? `The data disk ${d.path} is ${d.transport === 'usb' ? 'a USB disk' : 'rotational'}: Longhorn replicas live there, too slow for production.`
      : `${title[0].toUpperCase()}${title.slice(1)} ${d.path} is ${d.transport === 'nvme' ? 'NVMe' : `not NVMe (${d.transport})`}${d.rotational ? ', rotational' : ''}.`,
    whatToDo: warn ? 'Use an NVMe or SSD disk as install.data_disk for production.' : '',
    skippable: true,
  });
  out.push({
    id: `${role}.sector-size`,
    title: `${title} sector size`,
    subject: d.path,
    result: 'pass',
    measured: `${d.logicalSectorSize} logical / ${d.physicalSectorSize} physical${d.logicalSectorSize === 4096 ? ' (4Kn)' : ''}`,
    threshold: '',
    message:
      d.logicalSectorSize === 4096
        ? `${d.path} is a 4Kn disk (4096-byte logical sectors); the layout is 1 MiB aligned and supports it.`
        : `${d.path} has ${d.logicalSectorSize}-byte logical sectors.`,
    whatToDo: '',
    skippable: true,
  });
}

function sizeCheck(role: Role, d: DiskFacts, minGiB: number, message: string, why: string): PreflightCheck {
  const have = wholeGiB(d.sizeBytes);
  const ok = have >= minGiB;
  return {
    id: `${role}.size`,
    title: `${ROLE_TITLE[role]} size`,
    subject: d.path,
    result: ok ? 'pass' : 'fail',
    measured: `${have}GiB`,
    threshold: `>= ${minGiB}GiB (${why})`,
    message: ok ? `${d.path} has ${have}GiB.` : message,
    whatToDo: ok ? '' : `Use a disk of at least ${minGiB}GiB (install.skipchecks skips the size check).`,
    skippable: true,
  };
}

/** Other disks carrying labels of an old install: duplicate COS_* labels make the node boot the wrong partitions. */
function checkStaleLabels(input: DiskCheckInput, exclude: Set<string>, out: PreflightCheck[]): void {
  const staleRe = /^(COS_|HARV_LH_DEFAULT$)/;
  let found = 0;
  for (const d of input.facts.disks) {
    if (exclude.has(d.path) || d.inUse.bootMedium) continue;
    const labels = [d.wholeDiskFs?.label, ...d.partitions.flatMap((p) => [p.label, p.partLabel])]
      .filter((l): l is string => !!l && staleRe.test(l))
      .filter((l, i, all) => all.indexOf(l) === i);
    if (labels.length === 0) continue;
    found++;
    // Harvester's wipe_all_disks only wipes disks with a COS_OEM partition (harv-install).
    const hasOem = d.partitions.some((p) => p.label === 'COS_OEM' || p.partLabel === 'COS_OEM');
    const listed = wipeRequested(input.config, d, input.aliases);
    const wiped = listed || (input.config?.install?.wipeAllDisks === true && hasOem);
    out.push({
      id: 'disks.stale-labels',
      title: 'old install labels',
      subject: d.path,
      result: wiped ? 'pass' : 'warn',
      measured: labels.join(', '),
      threshold: 'no COS_*/HARV_LH_DEFAULT on other disks',
      message: wiped
        ? `${d.path} carries ${labels.join(', ')} from an old install; the config wipes it (${listed ? 'install.wipe_disks_list' : 'install.wipe_all_disks'}).`
        : `${d.path} carries ${labels.join(', ')} from an old install: duplicate labels make the new node boot or mount the wrong partitions.`,
      whatToDo: wiped
        ? ''
        : hasOem
          ? `Set install.wipe_all_disks: true or add ${d.path} to install.wipe_disks_list.`
          : `Add ${d.path} to install.wipe_disks_list (install.wipe_all_disks only wipes disks with a COS_OEM partition).`,
      skippable: true,
    });
  }
  if (found === 0) {
    out.push({
      id: 'disks.stale-labels',
      title: 'old install labels',
      result: 'pass',
      measured: 'none',
      threshold: 'no COS_*/HARV_LH_DEFAULT on other disks',
      message: 'No other disk carries COS_* or HARV_LH_DEFAULT labels.',
      whatToDo: '',
      skippable: true,
    });
  }
}

/**
 * Disks that report the same WWN are one LUN seen through several paths (dual-port SAS, FC/iSCSI
 * multipath). Harvester lists them once (lsblk de-duplicated by serial/WWN); writing through one path
 * while another is in use corrupts the disk. Emitted only when there are such disks.
 */
function checkMultipath(facts: MachineFacts, out: PreflightCheck[]): void {
  const byWwn = new Map<string, DiskFacts[]>();
  for (const d of facts.disks) {
    if (!d.wwn || d.transport === 'loop') continue;
    byWwn.set(d.wwn, [...(byWwn.get(d.wwn) ?? []), d]);
  }
  for (const [wwn, ds] of byWwn) {
    if (ds.length < 2) continue;
    const paths = ds.map((d) => d.path).join(', ');
    out.push({
      id: 'disks.multipath',
      title: 'one disk, several paths',
      subject: paths,
      result: 'warn',
      measured: `WWN ${wwn}`,
      threshold: 'one block device per disk',
      message: `${paths} report the same WWN ${wwn}: they are one disk seen through ${ds.length} paths.`,
      whatToDo: 'Install onto one path only (or the multipath device), and never list two paths of one disk as device and data_disk.',
      skippable: true,
    });
  }
}

/** A selector's row: the disk it chose, or the refusal with every disk and why. */
function selectorCheck(c: DiskChoice): PreflightCheck {
  const matching = c.candidates.filter((v) => v.taken || v.why.startsWith('matches')).length;
  return {
    id: `${c.role === 'device' ? 'device' : 'data-disk'}.selector`,
    title: `${c.role === 'device' ? 'install' : 'data'} disk chosen by rule`,
    subject: c.path,
    result: c.path ? 'pass' : 'fail',
    measured: `${matching} of ${c.candidates.length} disks match`,
    threshold: c.rule,
    message: c.path ? `${c.key} chose ${c.path}${c.recorded && c.recorded !== c.path ? ` (${c.recorded})` : ''}.` : `${c.problem}.`,
    whatToDo: c.path ? '' : `Change the rule (a tie_break picks one of several), or name the disk with ${c.role === 'device' ? 'install.device' : 'install.data_disk'}.`,
    skippable: false,
  };
}

/** The selectors' rows, the install disk's, then the data disk's, then what concerns the other disks. */
export function checkDisks(given: DiskCheckInput): DiskCheckOutput {
  const selection = selectDisks(given.config, given.facts, (n) => locate(given, n)?.disk);
  const input: DiskCheckInput = given.config ? { ...given, config: selection.config } : given;
  const out: PreflightCheck[] = selection.choices.map(selectorCheck);
  const refused = new Set(selection.choices.filter((c) => !c.path).map((c) => c.role));
  const install = input.config?.install;
  const witness = install?.role === 'witness';
  const { device, suggested } = refused.has('device') ? {} : input.config ? configuredDevice(input, out) : suggestedDevice(input, out);
  const dat: PreflightCheck[] = [];
  const { data, separateData } = dataDisk(input, device, dat);
  if (device) {
    if (input.config) checkUsage('device', device, input, out);
    const min = installDiskMinGiB({ separateDataDisk: separateData, witness });
    out.push(sizeCheck('device', device, min, DISK_MESSAGES.installDiskTooSmall(min), witness ? 'witness' : separateData ? 'separate data disk' : 'OS and data on one disk'));
    checkMedia('device', device, input.profile, out);
  }
  if (data) {
    checkUsage('data-disk', data, input, dat);
    if (!witness) dat.push(sizeCheck('data-disk', data, DATA_DISK_MIN_GIB, DISK_MESSAGES.dataDiskTooSmall, 'Longhorn data disk'));
    checkMedia('data-disk', data, input.profile, dat);
  }
  out.push(...dat);
  checkStaleLabels(input, new Set([device?.path, data?.path].filter((p): p is string => !!p)), out);
  checkMultipath(input.facts, out);
  return { checks: out, diskChoices: selection.choices, installDevice: device?.path, dataDisk: data?.path, suggestedDevice: suggested?.path };
}

/** install.device as the config names it (an empty one is Harvester's "no device specified", with a suggestion). */
function configuredDevice(input: DiskCheckInput, out: PreflightCheck[]): { device?: DiskFacts; suggested?: DiskFacts } {
  const name = input.config?.install?.device?.trim() ?? '';
  if (name) return { device: checkPresence('device', name, input, out) };
  const suggested = suggestInstallDevice(input.facts);
  out.push({
    id: 'device.exists',
    title: 'install disk exists',
    result: 'fail',
    measured: 'install.device is empty',
    threshold: 'a disk on this machine',
    message: 'no device specified',
    whatToDo: `Set install.device${suggested ? ` (suggested: ${suggested.path})` : ''}.`,
    skippable: false,
  });
  return { suggested };
}

/** Without a config: the disk preflight would install onto, or why there is none. */
function suggestedDevice(input: DiskCheckInput, out: PreflightCheck[]): { device?: DiskFacts; suggested?: DiskFacts } {
  const suggested = suggestInstallDevice(input.facts);
  const base = { id: 'device.suggested', title: 'suggested install disk', skippable: false };
  if (suggested) {
    out.push({
      ...base,
      subject: suggested.path,
      result: 'pass',
      measured: describeDisk(suggested),
      threshold: 'fixed unused disk: NVMe, then SSD, then largest',
      message: `Suggested install device: ${suggested.links.find((l) => l.includes('/by-id/')) ?? suggested.path}.`,
      whatToDo: '',
    });
  } else {
    out.push({
      ...base,
      result: 'fail',
      measured: `${input.facts.disks.length} disks, none usable`,
      threshold: 'a fixed, unused, non-boot disk',
      message: input.facts.disks.length === 0 ? 'No disk detected. Harvester requires at least one disk.' : 'No disk can take the install: every disk is removable, USB, a loop device, the boot medium, or in use.',
      whatToDo: 'Attach a local disk of at least 250GiB, or free one (unmount it, stop LVM/MD on it).',
    });
  }
  return { device: suggested, suggested };
}

/** install.data_disk; Harvester drops it when it equals device (pkg/console/install_panels.go addInstallPanel). */
function dataDisk(input: DiskCheckInput, device: DiskFacts | undefined, dat: PreflightCheck[]): { data?: DiskFacts; separateData: boolean } {
  const install = input.config?.install;
  const dataName = install?.dataDisk?.trim() || undefined;
  if (!dataName || dataName === install?.device?.trim()) return { separateData: false };
  const data = checkPresence('data-disk', dataName, input, dat);
  if (!data || !device) return { data, separateData: true };
  const same = data.path === device.path;
  dat.push({
    id: 'data-disk.distinct',
    title: 'data disk differs from install disk',
    subject: dataName,
    result: same ? 'fail' : 'pass',
    measured: same ? `both are ${device.path}` : `${data.path} vs ${device.path}`,
    threshold: 'different disks',
    message: same ? `install.data_disk (${dataName}) and install.device (${install?.device}) name the same disk ${device.path}.` : `The data disk ${data.path} is not the install disk.`,
    whatToDo: same ? 'Remove install.data_disk (one disk holds both), or name a different disk.' : '',
    skippable: false,
  });
  return { data: same ? undefined : data, separateData: true };
}
