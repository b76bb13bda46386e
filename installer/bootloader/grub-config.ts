/**
 * Pure renderers for the boot chain: the kernel command line of each entry, the early config
 * embedded in the EFI binary, the main grub.cfg on COS_STATE, and the environment blocks.
 */
import { OWN_CHAIN_ENTRIES, renderAssessmentHook } from '../../node/boot-assessment.js';

export const LABELS = {
  state: 'COS_STATE',
  oem: 'COS_OEM',
  recovery: 'COS_RECOVERY',
  persistent: 'COS_PERSISTENT',
  active: 'COS_ACTIVE',
  passive: 'COS_PASSIVE',
  system: 'COS_SYSTEM',
  grub: 'COS_GRUB',
} as const;

/** Directory on COS_STATE holding grub.cfg and the module directories (EFI prefix). */
export const GRUB_DIR = 'grub2';
export const GRUB_CFG = `${GRUB_DIR}/grub.cfg`;
/** Vendor directory on the ESP next to the removable-media path EFI/BOOT. */
export const EFI_VENDOR_DIR = 'hvinstall';

export type BootEntryId = 'active' | 'passive' | 'recovery';

export interface BootEntry {
  id: BootEntryId;
  title: string;
  /** Variable holding the partition device found by label (set by the label check). */
  deviceVar: string;
  image: string;
  cmdline: string;
}

export interface GrubConfigOptions {
  /** install.tty: the console= argument; default tty1. */
  tty?: string;
  /** Seconds the menu waits; default 10 (Elemental's). */
  timeoutSec?: number;
  /** Menu title prefix; default Harvester. */
  name?: string;
}

/**
 * The installed system's kernel command line (Harvester's /etc/cos/bootargs.cfg), for one image. The grub variable
 * ${third_party_kernel_args} comes from COS_OEM/grubenv and is expanded by grub at boot.
 */
export function kernelCmdline(entry: BootEntryId, tty = 'tty1'): string {
  const rootLabel = entry === 'recovery' ? LABELS.recovery : LABELS.state;
  const image = imagePath(entry);
  return [
    `root=LABEL=${rootLabel}`,
    `cos-img/filename=${image}`,
    'panic=0',
    'net.ifnames=1',
    `rd.cos.oemlabel=${LABELS.oem}`,
    `rd.cos.mount=LABEL=${LABELS.oem}:/oem`,
    `rd.cos.mount=LABEL=${LABELS.persistent}:/usr/local`,
    'rd.cos.oemtimeout=120',
    'audit=1',
    'audit_backlog_limit=8192',
    'intel_iommu=on',
    'amd_iommu=on',
    'iommu=pt',
    `console=${tty}`,
    '${third_party_kernel_args}',
  ].join(' ');
}

export function imagePath(entry: BootEntryId): string {
  return entry === 'recovery' ? '/cOS/recovery.img' : `/cOS/${entry}.img`;
}

export function bootEntries(opts: GrubConfigOptions = {}): BootEntry[] {
  const name = opts.name ?? 'Harvester';
  const tty = opts.tty ?? 'tty1';
  return [
    { id: 'active', title: `${name}`, deviceVar: 'hv_dev_state', image: imagePath('active'), cmdline: kernelCmdline('active', tty) },
    { id: 'passive', title: `${name} (fallback)`, deviceVar: 'hv_dev_state', image: imagePath('passive'), cmdline: kernelCmdline('passive', tty) },
    { id: 'recovery', title: `${name} recovery`, deviceVar: 'hv_dev_recovery', image: imagePath('recovery'), cmdline: kernelCmdline('recovery', tty) },
  ];
}

/**
 * A grub function that finds the one device carrying a filesystem label, and fails loudly when
 * there are several: grub's own `search --label` silently takes the first, which boots a stale
 * install or the wrong multipath path. It walks every partition (`(*,*)` needs the regexp module)
 * and probes its label; when grub cannot enumerate devices it falls back to `search`.
 * Usage: hv_find_label LABEL VAR — sets VAR to the device name (without parentheses).
 */
export function renderFindLabelFunction(): string {
  return `function hv_find_label {
  set hv_found=""
  set hv_more=""
  for hv_d in (*,*); do
    if probe --set=hv_l --label "$hv_d"; then
      if [ "$hv_l" = "$1" ]; then
        if [ -z "$hv_found" ]; then set hv_found="$hv_d"; else set hv_more="$hv_more $hv_d"; fi
      fi
    fi
  done
  if [ -n "$hv_more" ]; then
    echo "hvinstall: ERROR: the filesystem label $1 is on more than one device: $hv_found$hv_more"
    echo "hvinstall: refusing to guess which one to boot. Detach or relabel the other disk"
    echo "hvinstall: (an old install, a USB stick, a second multipath path) and reboot."
    set hv_label_error="$1 on $hv_found$hv_more"
    export hv_label_error
  fi
  if [ -z "$hv_found" ]; then
    search --no-floppy --label "$1" --set=hv_found
  fi
  if regexp --set=1:hv_plain '^[(](.*)[)]$' "$hv_found"; then set hv_found="$hv_plain"; fi
  set "$2"="$hv_found"
  export "$2"
}`;
}

/** Name of the early config inside the EFI binary's memdisk. */
export const MEMDISK_EARLY_CFG = 'hv-early.cfg';

/**
 * The config grub-mkimage embeds (-c). Grub runs it with its minimal rescue parser (no functions,
 * no loops), so it only hands over to the full early config kept in the binary's memdisk.
 */
export function renderEmbeddedCfg(): string {
  return `configfile (memdisk)/${MEMDISK_EARLY_CFG}\n`;
}

/**
 * The early config (in the EFI binary's memdisk; the BIOS core's grub.cfg): find COS_STATE by
 * label (refusing duplicates), then hand over to COS_STATE/grub2/grub.cfg.
 */
export function renderEarlyCfg(): string {
  return `# hvinstall early boot: find COS_STATE by label and load its grub.cfg.
insmod part_gpt
insmod part_msdos
insmod ext2
insmod regexp
insmod probe
${renderFindLabelFunction()}
hv_find_label ${LABELS.state} hv_dev_state
if [ -n "$hv_label_error" ]; then
  echo "hvinstall: boot stopped: duplicate label $hv_label_error"
  sleep --interruptible 3600
fi
if [ -z "$hv_dev_state" ]; then
  echo "hvinstall: ERROR: no filesystem labelled ${LABELS.state} was found; this disk is not (fully) installed."
  sleep --interruptible 3600
else
  set root="$hv_dev_state"
  set prefix="($hv_dev_state)/${GRUB_DIR}"
  configfile "($hv_dev_state)/${GRUB_CFG}"
fi
`;
}

/** The variable the boot-assessment script sets for an entry's extra kernel arguments (empty unless armed). */
const ASSESSMENT_ARGS_VAR: Partial<Record<BootEntryId, string>> = { active: 'hv_assessment_active_args', passive: 'hv_assessment_passive_args' };

/** COS_STATE/grub2/grub.cfg: entries active -> passive -> recovery, one-shot and saved entries, fallback. */
export function renderGrubCfg(opts: GrubConfigOptions = {}): string {
  const entries = bootEntries(opts);
  const timeout = opts.timeoutSec ?? 10;
  const body = entries
    .map(
      (e) => `menuentry "${e.title}" --id ${e.id} {
  if [ -n "$hv_label_error" ]; then echo "hvinstall: WARNING: booting despite duplicate label $hv_label_error"; fi
  if [ -z "$${e.deviceVar}" ]; then
    echo "hvinstall: ERROR: the partition holding ${e.image} was not found"
  else
    loopback hv${e.id} ($${e.deviceVar})${e.image}
    linux (hv${e.id})/boot/vmlinuz ${e.cmdline}${ASSESSMENT_ARGS_VAR[e.id] ? ` \${${ASSESSMENT_ARGS_VAR[e.id]}}` : ''}
    initrd (hv${e.id})/boot/initrd
  fi
}`,
    )
    .join('\n');
  return `# Written by hvinstall. Boot order: active, then passive, then recovery.
# Knobs live in COS_OEM/grubenv: next_entry (one-shot), saved_entry, third_party_kernel_args.
set timeout=${timeout}
serial --unit=0 --speed=115200
terminal_input console serial
terminal_output console serial
insmod part_gpt
insmod part_msdos
insmod ext2
insmod loopback
insmod linux
insmod loadenv
insmod regexp
insmod probe
insmod test
insmod search
insmod search_label
${renderFindLabelFunction()}
set hv_label_error=""
hv_find_label ${LABELS.state} hv_dev_state
hv_find_label ${LABELS.oem} hv_dev_oem
hv_find_label ${LABELS.recovery} hv_dev_recovery

set default=0
set fallback="1 2"
if [ -n "$hv_dev_oem" ]; then
  load_env -f ($hv_dev_oem)/grubenv
  if [ -n "$next_entry" ]; then
    set default="$next_entry"
    set next_entry=
    save_env -f ($hv_dev_oem)/grubenv next_entry
  elif [ -n "$saved_entry" ]; then
    set default="$saved_entry"
  fi
fi
export third_party_kernel_args
export hv_dev_state
export hv_dev_oem
export hv_dev_recovery
if [ -n "$hv_label_error" ]; then
  # Never boot automatically with duplicate labels: the operator must choose (or fix the disks).
  set timeout=-1
  echo "hvinstall: ERROR: duplicate filesystem label $hv_label_error: automatic boot disabled."
fi

${body}

if [ -n "$hv_dev_state" ]; then
${renderAssessmentHook(OWN_CHAIN_ENTRIES, '($hv_dev_state)').trimEnd()}
fi

if [ -n "$hv_dev_oem" ]; then
  if [ -f ($hv_dev_oem)/grubcustom ]; then
    source ($hv_dev_oem)/grubcustom
  fi
fi
`;
}

/** Variables of COS_OEM/grubenv at install time (Harvester writes third_party_kernel_args there). */
export function oemGrubenvVars(thirdPartyKernelArgs = ''): Record<string, string> {
  return { third_party_kernel_args: thirdPartyKernelArgs, next_entry: '', saved_entry: '' };
}

/** COS_STATE/grub_oem_env, as Elemental writes it: the labels its tooling looks up. */
export function stateGrubenvVars(): Record<string, string> {
  return {
    state_label: LABELS.state,
    active_label: LABELS.active,
    passive_label: LABELS.passive,
    recovery_label: LABELS.recovery,
    system_label: LABELS.system,
    oem_label: LABELS.oem,
    persistent_label: LABELS.persistent,
  };
}

/** grub-mkimage modules for the EFI binary: enough to find COS_STATE and read its grub.cfg. */
export const EFI_IMAGE_MODULES = [
  'part_gpt', 'part_msdos', 'fat', 'ext2', 'normal', 'configfile', 'search', 'search_label',
  'search_fs_uuid', 'regexp', 'probe', 'test', 'echo', 'sleep', 'serial', 'terminal', 'loadenv',
  'loopback', 'linux', 'gzio', 'boot', 'efi_gop', 'all_video', 'memdisk', 'tar',
] as const;

/** Modules grub-install builds into the BIOS core (the rest load from COS_STATE). */
export const BIOS_CORE_MODULES = ['part_gpt', 'part_msdos', 'ext2', 'search', 'search_label', 'regexp', 'probe', 'test', 'echo', 'sleep'] as const;
