/**
 * planInstall: config + machine facts → the partition table, images, files and steps of an install.
 * Pure: no I/O, so every layout (EFI/BIOS/MBR × single/data disk/witness × 512/4Kn) is unit-tested
 * without root. Layout and sizes as Harvester's (harvester/harvester-installer pkg/config/cos.go, pkg/config/config.go, pkg/util/disk.go).
 */
import { createHash } from 'node:crypto';
import { HvError, ExitCode } from '../../lib/errors.js';
import type { HarvesterConfig } from '../../config/types.js';
import type { DiskFacts, MachineFacts } from '../preflight/types.js';
import {
  BIOS_GRUB_MIB,
  DATA_DISK_MIN_GIB,
  DEFAULT_PERSISTENT_MIB,
  DISK_MESSAGES,
  ESP_MIB,
  MBR_MAX_BYTES,
  MIN_PARTITION_MIB,
  MIN_PERSISTENT_MIB,
  MIN_SHARED_DATA_MIB,
  MiB,
  OEM_MIB,
  RECOVERY_MIB,
  SINGLE_DISK_MIN_GIB,
  STATE_MIB,
  alignDown,
  formatBytes,
  installDiskMinGiB,
  parsePartitionSizeMiB,
  recoverySizeMiB,
  stateSizeMiB,
  systemSizeForSourceMiB,
  wholeGiB,
} from '../../config/disk-sizes.js';
import type {
  Firmware,
  InstallPlan,
  PartitionRole,
  PlannedDataDisk,
  PlannedFile,
  PlannedImage,
  PlannedPartition,
  PlannedStep,
  PartitionTableKind,
} from './types.js';

export interface PlanOptions {
  /** `--device`: must name the same disk as install.device when both are given. */
  device?: string;
  /** Bytes of the OS source tree; sizes active.img (and grows COS_STATE) when larger than Harvester assumes. */
  sourceSizeBytes?: number;
  /** Explicit active.img size (MiB); wins over sourceSizeBytes. */
  systemSizeMiB?: number;
  /** Files the renderer will write to /oem (paths relative to COS_OEM) beyond harvester.config. */
  extraOemFiles?: Array<{ path: string; mode: number; what: string }>;
}

/** A plan refused: every problem found, each a sentence saying what and what to do. */
export class PlanRefusedError extends HvError {
  constructor(readonly problems: string[], where: string) {
    super(problems.length === 1 ? problems[0]! : `the install cannot proceed:\n${problems.map((p) => `  - ${p}`).join('\n')}`, {
      where,
      hint: 'fix the config (or choose another disk) and run `hvinstall plan` again',
      exitCode: ExitCode.checkFailed,
    });
    this.name = 'PlanRefusedError';
  }
}

/** Paths bind-mounted from COS_PERSISTENT (harvester/harvester-installer pkg/config/templates/cos-rootfs.yaml PERSISTENT_STATE_PATHS). */
export const DEFAULT_PERSISTENT_STATE_PATHS = [
  '/etc/NetworkManager',
  '/etc/systemd',
  '/etc/rancher',
  '/etc/ssh',
  '/etc/iscsi',
  '/etc/nvme',
  '/etc/cni',
  '/etc/pki/trust/anchors',
  '/home',
  '/opt',
  '/root',
  '/usr/libexec',
  '/var/log',
  '/var/lib/rancher',
  '/var/lib/kubelet',
  '/var/lib/wicked',
  '/var/lib/NetworkManager',
  '/var/lib/cni',
  '/var/lib/third-party',
  '/var/crash',
  '/var/lib/longhorn',
];
export const LONGHORN_DEFAULT_DISK = '/var/lib/harvester/defaultdisk';

export const STEP_DESCRIPTIONS: PlannedStep[] = [
  { name: 'guard', description: 'lock the disk; refuse a mounted, swap, held or boot-medium disk' },
  { name: 'clear', description: 'deactivate holders, clear stale COS_*/HARV_* labels, wipe signatures' },
  { name: 'partition', description: 'write the partition table and wait until the kernel shows every partition' },
  { name: 'format', description: 'make the filesystems with their labels (and the data disk)' },
  { name: 'verify', description: 'check every label resolves to exactly one device' },
  { name: 'deploy', description: 'build active.img, copy passive.img and recovery.img, write state.yaml' },
  { name: 'bootloader', description: 'install grub with active/passive/recovery entries and grubenv' },
  { name: 'oem', description: 'write /oem: harvester.config and the node configuration files' },
  { name: 'persistent', description: 'create the persistent state layout under COS_PERSISTENT/.state; copy the image bundle (if any) to /var/lib/rancher/hvagent/bundle there' },
  { name: 'agent', description: 'copy the self-contained hvagent to COS_PERSISTENT (/usr/local/lib/hvagent), link its units (hvagent.service, hvagent-console.service) into the persistent /etc/systemd and enable them' },
  { name: 'chroot', description: 'in a chroot of active.img (/dev /proc /sys /run, /oem and /usr/local bound): SELinux relabel when the image has a policy and setfiles, then os.after_install_chroot_commands' },
  { name: 'finish', description: 'write the install log, sync, unmount, release the disk' },
];

/** Finds a disk by path, kernel name or one of its /dev/disk/by-* links. */
export function findDisk(facts: MachineFacts, device: string): DiskFacts | undefined {
  const want = device.replace(/\/+$/, '');
  return facts.disks.find((d) => d.path === want || `/dev/${d.name}` === want || d.name === want || d.links.includes(want));
}

type Install = NonNullable<HarvesterConfig['install']>;

/**
 * The stages, each a pure function of what came before: the target disk, the boot and table kind,
 * the data disk, the image sizes, the partition sizes (with Harvester's checks), the partitions laid
 * out, the digest the UUIDs derive from, the wipe list. Problems are gathered and reported at once;
 * the target stage stops at the first, as nothing after it makes sense without a disk.
 */
export function planInstall(config: HarvesterConfig, facts: MachineFacts, opts: PlanOptions = {}): InstallPlan {
  const install = config.install ?? {};
  const target = resolveTarget(install, facts, opts);
  const kind = chooseKind(install, facts, target);
  const data = resolveDataDisk(install, facts, target, kind.witness);
  const images = sizeImages(opts, kind.firmware, target);
  const sizes = sizePartitions(install, target, kind, data.disk, images);
  const problems = [...kind.problems, ...data.problems, ...sizes.problems];
  if (problems.length) throw new PlanRefusedError(problems, PLAN_WHERE);

  const specs = partitionSpecs(kind, images, sizes);
  const digest = planDigest(config, target, data.disk, kind, specs, images.systemSizeMiB);
  const partitions = layOut(specs, sizes, target.logicalSectorSize, digest);
  const dataDisk = data.disk ? plannedDataDisk(data.disk, digest) : undefined;
  const notes = [...images.notes, ...sizes.notes];
  if (!sizes.hasDataPartition && !dataDisk) {
    notes.push(`no Longhorn data partition (${kind.witness ? 'witness role' : 'msdos table without data_disk'}): ${LONGHORN_DEFAULT_DISK} lives on COS_PERSISTENT`);
  }
  const wipe = wipeList(install, facts, target, dataDisk, notes);

  const persistentStatePaths = [...DEFAULT_PERSISTENT_STATE_PATHS];
  for (const p of config.os?.persistentStatePaths ?? []) if (!persistentStatePaths.includes(p)) persistentStatePaths.push(p);
  if (!sizes.hasDataPartition && !dataDisk) persistentStatePaths.push(LONGHORN_DEFAULT_DISK);

  const destroys = [describeDisk(target)];
  if (data.disk) destroys.push(describeDisk(data.disk));
  for (const w of wipe) destroys.push(`${describeDisk(findDisk(facts, w)!)} (partition table wiped)`);

  return {
    digest,
    device: target.path,
    deviceSizeBytes: target.sizeBytes,
    logicalSectorSize: target.logicalSectorSize,
    firmware: kind.firmware,
    table: kind.table,
    diskGuid: deterministicUuid(digest, 'disk'),
    role: kind.role,
    mode: String(install.mode || 'create'),
    partitions,
    ...(dataDisk ? { dataDisk } : {}),
    wipeDisks: wipe,
    systemSizeMiB: images.systemSizeMiB,
    images: plannedImages(images.systemSizeMiB),
    files: plannedFiles(opts),
    persistentStatePaths,
    steps: STEP_DESCRIPTIONS.map((st) => ({ ...st })),
    notes,
    destroys,
  };
}

const PLAN_WHERE = 'install plan';

function refuse(problem: string): never {
  throw new PlanRefusedError([problem], PLAN_WHERE);
}

/** The disk to install onto: named, present, the one the config names, with a supported sector size. */
function resolveTarget(install: Install, facts: MachineFacts, opts: PlanOptions): DiskFacts {
  const configured = install.device?.trim() || undefined;
  const requested = opts.device?.trim() || configured;
  if (!requested) refuse('install.device is required: name the disk to install onto (or pass --device)');
  const disk = findDisk(facts, requested);
  if (!disk) refuse(`${requested} is not a disk on this machine (known: ${facts.disks.map((d) => d.path).join(', ') || 'none'})`);
  if (opts.device && configured && findDisk(facts, configured)?.path !== disk.path) {
    refuse(`--device ${opts.device} is not the disk named in the config (install.device: ${configured}); refusing to touch a disk the config does not name`);
  }
  const sector = disk.logicalSectorSize;
  if (sector !== 512 && sector !== 4096) refuse(`${disk.path} has ${sector}-byte logical sectors; only 512 and 4096 are supported`);
  if (disk.sizeBytes % sector !== 0) refuse(`${disk.path} size ${disk.sizeBytes} is not a multiple of its ${sector}-byte sectors`);
  return disk;
}

interface Kind {
  role: string;
  witness: boolean;
  skipChecks: boolean;
  firmware: Firmware;
  table: PartitionTableKind;
  problems: string[];
}

/** Role, firmware and partition table, and what forbids the combination. */
function chooseKind(install: Install, facts: MachineFacts, target: DiskFacts): Kind {
  const role = String(install.role || 'default');
  const firmware: Firmware = install.forceEfi || facts.firmware.uefi ? 'efi' : 'bios';
  const table: PartitionTableKind = install.forceMbr ? 'msdos' : 'gpt';
  const problems: string[] = [];
  if (table === 'msdos' && firmware === 'efi') {
    problems.push(`cannot force MBR on UEFI system: ${facts.firmware.uefi ? 'UEFI' : 'force_efi is set'} (remove install.force_mbr${install.forceEfi ? ' or install.force_efi' : ''})`);
  }
  if (table === 'msdos' && target.sizeBytes > MBR_MAX_BYTES) {
    problems.push(`disk size too large for MBR partitioning table: ${target.sizeBytes} (${target.path}; msdos tables address at most ${MBR_MAX_BYTES} bytes, remove install.force_mbr)`);
  }
  return { role, witness: role === 'witness', skipChecks: install.skipchecks === true, firmware, table, problems };
}

/** A separate data disk; Harvester clears data_disk when it names the install disk. */
function resolveDataDisk(install: Install, facts: MachineFacts, target: DiskFacts, witness: boolean): { disk?: DiskFacts; problems: string[] } {
  const name = install.dataDisk?.trim() || undefined;
  if (!name) return { problems: [] };
  const d = findDisk(facts, name);
  if (!d) return { problems: [`install.data_disk ${name} is not a disk on this machine`] };
  if (d.path === target.path) return { problems: [] };
  return { disk: d, problems: witness ? [`a witness node holds no Longhorn data, but install.data_disk is ${name}: remove it`] : [] };
}

interface ImageSizes {
  systemSizeMiB: number;
  stateMiB: number;
  recoveryMiB: number;
  notes: string[];
}

/** active.img and the partitions that hold it and its upgrade transition image. */
function sizeImages(opts: PlanOptions, firmware: Firmware, target: DiskFacts): ImageSizes {
  const systemSizeMiB = opts.systemSizeMiB ?? systemSizeForSourceMiB(opts.sourceSizeBytes);
  const stateMiB = stateSizeMiB(systemSizeMiB);
  const recoveryMiB = recoverySizeMiB(systemSizeMiB);
  const notes: string[] = [];
  if (firmware === 'bios' && target.logicalSectorSize === 4096) {
    notes.push(`${target.path} has 4096-byte sectors: most legacy BIOS firmware cannot boot from such a disk; prefer UEFI (install.force_efi)`);
  }
  if (stateMiB > STATE_MIB) {
    notes.push(`COS_STATE grown from ${STATE_MIB} to ${stateMiB} MiB to hold active, passive and an upgrade's transition image of ${systemSizeMiB} MiB each (harvester#7457)`);
  }
  if (recoveryMiB > RECOVERY_MIB) {
    notes.push(`COS_RECOVERY grown from ${RECOVERY_MIB} to ${recoveryMiB} MiB to hold recovery.img and its upgrade transition image`);
  }
  return { systemSizeMiB, stateMiB, recoveryMiB, notes };
}

interface PartitionSizes {
  hasDataPartition: boolean;
  /** Partitions start at 1 MiB and end before the last whole MiB (and the GPT backup). */
  firstMiB: number;
  endMiB: number;
  bootMiB: number;
  persistentMiB: number | 'rest';
  problems: string[];
  notes: string[];
}

/** The partition sizes and Harvester's size rules: disk minimums, persistent_partition_size, the fit. */
function sizePartitions(install: Install, target: DiskFacts, kind: Kind, dataDisk: DiskFacts | undefined, images: ImageSizes): PartitionSizes {
  const problems: string[] = [];
  const notes: string[] = [];
  const diskGiB = wholeGiB(target.sizeBytes);
  const hasDataPartition = !dataDisk && !kind.witness && kind.table === 'gpt';
  if (!kind.skipChecks) {
    const min = installDiskMinGiB({ separateDataDisk: !!dataDisk, witness: kind.witness });
    if (diskGiB < min) problems.push(`${DISK_MESSAGES.installDiskTooSmall(min)} (${target.path} is ${diskGiB}Gi)`);
    if (dataDisk && wholeGiB(dataDisk.sizeBytes) < DATA_DISK_MIN_GIB) {
      problems.push(`${DISK_MESSAGES.dataDiskTooSmall} (${dataDisk.path} is ${wholeGiB(dataDisk.sizeBytes)}Gi)`);
    }
  }

  const firstMiB = 1;
  const bootMiB = kind.table === 'msdos' ? 0 : kind.firmware === 'efi' ? ESP_MIB : BIOS_GRUB_MIB;
  const fixedMiB = bootMiB + OEM_MIB + images.recoveryMiB + images.stateMiB;
  const usableEndBytes = kind.table === 'gpt' ? target.sizeBytes - gptBackupBytes(target.logicalSectorSize) : target.sizeBytes;
  const endMiB = Math.floor(alignDown(usableEndBytes, MiB) / MiB);

  let persistentMiB: number | 'rest' = 'rest';
  if (hasDataPartition) {
    const given = install.persistentPartitionSize;
    let wanted = given ? parsePartitionSizeMiB(given) : DEFAULT_PERSISTENT_MIB;
    if (wanted === undefined) {
      problems.push(DISK_MESSAGES.partitionFormat);
      wanted = DEFAULT_PERSISTENT_MIB;
    }
    const maxMiB = Math.floor(target.sizeBytes / MiB) - (fixedMiB + MIN_SHARED_DATA_MIB);
    if (!kind.skipChecks && diskGiB < SINGLE_DISK_MIN_GIB) {
      // already reported above as the installation-disk minimum
    } else if (!kind.skipChecks && wanted < MIN_PERSISTENT_MIB) {
      problems.push(`${DISK_MESSAGES.partitionTooSmall} (install.persistent_partition_size: ${given})`);
    } else if (wanted > maxMiB) {
      if (kind.skipChecks && maxMiB >= MIN_PARTITION_MIB) {
        notes.push(`persistent_partition_size clamped from ${wanted} to ${maxMiB} MiB (skipchecks)`);
        wanted = maxMiB;
      } else {
        problems.push(`${DISK_MESSAGES.partitionTooLarge(Math.max(0, Math.floor(maxMiB / 1024)))} (install.persistent_partition_size: ${given ?? `${DEFAULT_PERSISTENT_MIB / 1024}Gi default`}, ${target.path} is ${diskGiB}Gi)`);
      }
    }
    persistentMiB = wanted;
  }

  // Whatever else: the layout must physically fit, checks skipped or not.
  const persistentFixed = typeof persistentMiB === 'number' ? persistentMiB : 0;
  if (endMiB - firstMiB - fixedMiB - persistentFixed < MIN_PARTITION_MIB) {
    // GPT's backup table takes the disk's last MiB (after alignment); an msdos table keeps nothing there.
    const need = fixedMiB + persistentFixed + MIN_PARTITION_MIB + firstMiB + (kind.table === 'gpt' ? 1 : 0);
    problems.push(`the layout does not fit on ${target.path}: it needs at least ${need} MiB, the disk has ${Math.floor(target.sizeBytes / MiB)} MiB`);
  }
  return { hasDataPartition, firstMiB, endMiB, bootMiB, persistentMiB, problems, notes };
}

type Spec = { role: PartitionRole; name: string; label?: string; fs: PlannedPartition['fs']; type: string; mib: number | 'rest'; mount?: string; bootable?: boolean };

/** Elemental's PartitionsByInstallOrder: boot, oem, recovery, state, persistent, then the data partition. */
function partitionSpecs(kind: Kind, images: ImageSizes, sizes: PartitionSizes): Spec[] {
  const specs: Spec[] = [];
  if (kind.table === 'gpt' && kind.firmware === 'efi') specs.push({ role: 'efi', name: 'efi', label: 'COS_GRUB', fs: 'vfat', type: 'EF00', mib: ESP_MIB, mount: '/boot/efi' });
  if (kind.table === 'gpt' && kind.firmware === 'bios') specs.push({ role: 'bios', name: 'bios', fs: 'none', type: 'EF02', mib: BIOS_GRUB_MIB });
  const linux = kind.table === 'gpt' ? '8300' : '83';
  specs.push({ role: 'oem', name: 'oem', label: 'COS_OEM', fs: 'ext4', type: linux, mib: OEM_MIB, mount: '/oem' });
  specs.push({ role: 'recovery', name: 'recovery', label: 'COS_RECOVERY', fs: 'ext4', type: linux, mib: images.recoveryMiB });
  specs.push({ role: 'state', name: 'state', label: 'COS_STATE', fs: 'ext4', type: linux, mib: images.stateMiB, mount: '/run/initramfs/cos-state', bootable: kind.table === 'msdos' });
  specs.push({ role: 'persistent', name: 'persistent', label: 'COS_PERSISTENT', fs: 'ext4', type: linux, mib: sizes.persistentMiB, mount: '/usr/local' });
  if (sizes.hasDataPartition) specs.push({ role: 'data', name: 'HARV_LH_DEFAULT', label: 'HARV_LH_DEFAULT', fs: 'ext4', type: linux, mib: 'rest', mount: LONGHORN_DEFAULT_DISK });
  return specs;
}

/**
 * The digest over everything that shapes the result; UUIDs derive from it so a resumed install and
 * an uninterrupted one end byte-for-byte the same where it matters (table, labels, UUIDs, files).
 */
function planDigest(config: HarvesterConfig, target: DiskFacts, dataDisk: DiskFacts | undefined, kind: Kind, specs: Spec[], systemSizeMiB: number): string {
  return sha256(
    stableJson({
      config,
      disk: { size: target.sizeBytes, sector: target.logicalSectorSize, serial: target.serial ?? '', wwn: target.wwn ?? '', model: target.model ?? '' },
      dataDisk: dataDisk ? { path: dataDisk.path, size: dataDisk.sizeBytes, serial: dataDisk.serial ?? '' } : null,
      firmware: kind.firmware,
      table: kind.table,
      specs,
      systemSizeMiB,
    }),
  );
}

/** Consecutive MiB-aligned partitions from 1 MiB; 'rest' takes what is left before the end. */
function layOut(specs: Spec[], sizes: PartitionSizes, sector: number, digest: string): PlannedPartition[] {
  let cursorMiB = sizes.firstMiB;
  return specs.map((s, i) => {
    const mib = s.mib === 'rest' ? sizes.endMiB - cursorMiB : s.mib;
    const startBytes = cursorMiB * MiB;
    const sizeBytes = mib * MiB;
    cursorMiB += mib;
    const p: PlannedPartition = {
      number: i + 1,
      role: s.role,
      name: s.name,
      fs: s.fs,
      typeCode: s.type,
      startBytes,
      sizeBytes,
      startSector: startBytes / sector,
      endSector: (startBytes + sizeBytes) / sector - 1,
      partUuid: deterministicUuid(digest, `part:${s.name}`),
    };
    if (s.label) p.label = s.label;
    if (s.mount) p.mount = s.mount;
    if (s.bootable) p.bootable = true;
    if (s.fs === 'vfat') p.fsUuid = deterministicVfatId(digest, s.name);
    if (s.fs === 'ext4') p.fsUuid = deterministicUuid(digest, `fs:${s.name}`);
    return p;
  });
}

function plannedDataDisk(d: DiskFacts, digest: string): PlannedDataDisk {
  return { path: d.path, sizeBytes: d.sizeBytes, label: 'HARV_LH_DEFAULT', fs: 'ext4', fsUuid: deterministicUuid(digest, 'fs:data-disk'), mount: LONGHORN_DEFAULT_DISK };
}

/** Other disks to wipe, sorted: wipe_disks_list (missing ones skipped, as Harvester does) and, with wipe_all_disks, every old install. */
function wipeList(install: Install, facts: MachineFacts, target: DiskFacts, dataDisk: PlannedDataDisk | undefined, notes: string[]): string[] {
  const wipe = new Set<string>();
  for (const name of install.wipeDisksList ?? []) {
    const d = findDisk(facts, name);
    if (!d) notes.push(`install.wipe_disks_list: ${name} does not exist, skipped`);
    else if (d.path !== target.path && d.path !== dataDisk?.path) wipe.add(d.path);
  }
  if (install.wipeAllDisks) {
    for (const d of facts.disks) {
      if (d.path === target.path || d.path === dataDisk?.path) continue;
      if (d.partitions.some((p) => p.label === 'COS_OEM')) wipe.add(d.path);
    }
  }
  return [...wipe].sort();
}

function plannedImages(systemSizeMiB: number): PlannedImage[] {
  return [
    { on: 'COS_STATE', file: 'cOS/active.img', label: 'COS_ACTIVE', fs: 'ext2', sizeMiB: systemSizeMiB },
    { on: 'COS_STATE', file: 'cOS/passive.img', label: 'COS_PASSIVE', fs: 'ext2', sizeMiB: systemSizeMiB },
    { on: 'COS_RECOVERY', file: 'cOS/recovery.img', label: 'COS_SYSTEM', fs: 'ext2', sizeMiB: systemSizeMiB },
  ];
}

function plannedFiles(opts: PlanOptions): PlannedFile[] {
  return [
    { on: 'COS_OEM', path: 'harvester.config', mode: 0o600, what: "the config in Harvester's lowercase form (holds the token)" },
    ...(opts.extraOemFiles ?? []).map((f) => ({ on: 'COS_OEM' as const, ...f })),
    { on: 'COS_OEM', path: 'install/install.log', mode: 0o600, what: 'the install log, secrets redacted' },
    { on: 'COS_OEM', path: 'install/journal.json', mode: 0o644, what: 'the step journal of this install' },
  ];
}

/** The refusals that depend on what the machine is doing right now (not on the layout). */
export function targetInUseProblems(
  disk: DiskFacts,
  opts: { ownMountPrefix?: string; busyHolders?: Array<{ holder: string; why: string }> } = {},
): string[] {
  const problems: string[] = [];
  const ownMount = (m: string): boolean => opts.ownMountPrefix !== undefined && m.startsWith(opts.ownMountPrefix);
  const mounts = [...disk.inUse.mountpoints, ...disk.partitions.flatMap((p) => p.mountpoints)].filter((m) => !ownMount(m));
  if (disk.inUse.bootMedium) problems.push(`${disk.path} holds the running live system (the boot medium): choose another disk`);
  if (mounts.length) problems.push(`${disk.path} is mounted (${[...new Set(mounts)].join(', ')}): unmount it first`);
  if (disk.inUse.swap) problems.push(`${disk.path} has active swap: run swapoff on it first`);
  // Without a finer view every holder counts; with one, only busy holders do (idle ones are deactivated by the clear step).
  const held = opts.busyHolders ? opts.busyHolders.map((b) => `${b.holder} (${b.why})`) : disk.inUse.holders;
  if (held.length) {
    problems.push(`${disk.path} is held by ${held.join(', ')} (LVM, MD or device-mapper in use): unmount and deactivate them (e.g. vgchange -an, mdadm --stop) first`);
  }
  if (disk.readOnly) problems.push(`${disk.path} is read-only`);
  return problems;
}

function describeDisk(d: DiskFacts): string {
  const what = [d.model, d.serial].filter(Boolean).join(' ');
  const parts = d.partitions.map((p) => `${p.path}${p.label ? ` ${p.label}` : ''}${p.fsType ? ` ${p.fsType}` : ''} ${formatBytes(p.sizeBytes)}`);
  const whole = d.wholeDiskFs?.fsType ? ` ${d.wholeDiskFs.fsType}${d.wholeDiskFs.label ? ` ${d.wholeDiskFs.label}` : ''} on the whole disk` : '';
  return `${d.path} (${formatBytes(d.sizeBytes)}${what ? `, ${what}` : ''})${whole}${parts.length ? `: ${parts.join('; ')}` : parts.length === 0 && !whole ? ': no partitions' : ''}`;
}

/** The GPT backup header plus a 16 KiB entry array at the end of the disk. */
export function gptBackupBytes(sector: number): number {
  return sector + Math.ceil(16384 / sector) * sector;
}

function sha256(s: string): string {
  return createHash('sha256').update(s).digest('hex');
}

export function deterministicUuid(seed: string, name: string): string {
  const h = sha256(`${seed}\0${name}`);
  // RFC 4122 shape (version 4 bits, variant 10) so every tool accepts it.
  const v = `${h.slice(0, 12)}4${h.slice(13, 16)}${((Number.parseInt(h[16]!, 16) & 0x3) | 0x8).toString(16)}${h.slice(17, 32)}`;
  return `${v.slice(0, 8)}-${v.slice(8, 12)}-${v.slice(12, 16)}-${v.slice(16, 20)}-${v.slice(20, 32)}`;
}

/** A FAT volume id (mkfs.vfat -i): 8 hex digits. */
export function deterministicVfatId(seed: string, name: string): string {
  return sha256(`${seed}\0vfat:${name}`).slice(0, 8).toUpperCase();
}

export function stableJson(v: unknown): string {
  if (Array.isArray(v)) return `[${v.map(stableJson).join(',')}]`;
  if (v && typeof v === 'object') {
    return `{${Object.keys(v)
      .sort()
      .filter((k) => (v as Record<string, unknown>)[k] !== undefined)
      .map((k) => `${JSON.stringify(k)}:${stableJson((v as Record<string, unknown>)[k])}`)
      .join(',')}}`;
  }
  return JSON.stringify(v) ?? 'null';
}
