/**
 * The boot-assessment contract between hvinstall (which arms it), grub (which counts the attempt
 * and falls back) and hvagent (which decides "healthy", commits or falls back): the files on
 * COS_STATE, the grubenv variables and their states, the kernel arguments of an attempt and of a
 * fallback, and the grub script every party relies on. docs/upgrade.md tells the story.
 *
 * States of `hv_assessment_state` in COS_STATE/hv_assessment (grub reads and writes it at every
 * boot; no arithmetic, so any grub with loadenv will do):
 *
 *   ""        nothing to assess: every boot is the default entry, as if the hook were absent
 *   armed     an upgrade wrote a new active.img; the next boot is its one attempt
 *   trying    grub started that attempt; coming back to grub in this state means it failed
 *             (a panic, an initramfs emergency, a crashed systemd, or hvagent's verdict)
 *   fallback  grub booted the previous image (passive.img) instead; hvagent commits it
 *
 * Elemental v1's own arming (`enable_boot_assessment=yes` in COS_STATE/boot_assessment, written
 * by `elemental upgrade`'s after-upgrade stage: rancher/elemental-toolkit v1.1.8
 * pkg/features/embedded/cloud-config-essentials/system/oem/08_boot_assessment.yaml) counts as
 * `armed`, so Harvester's upgrade job is guarded too.
 */

/** Files on COS_STATE (paths relative to its root). */
export const ASSESSMENT_ENV_FILE = 'hv_assessment';
export const ASSESSMENT_SCRIPT_FILE = 'hv_assessment.cfg';
/** Elemental v1's environment; read for its arming, cleared once adopted. */
export const ELEMENTAL_ASSESSMENT_ENV_FILE = 'boot_assessment';
/** COS_STATE's grubcustom, which the image's grub.cfg sources after its entries. */
export const STATE_GRUBCUSTOM_FILE = 'grubcustom';
/** Where an image that failed its attempt is kept for diagnosis until the next upgrade. */
export const FAILED_IMAGE_FILE = 'cOS/failed.img';
export const ACTIVE_IMAGE_FILE = 'cOS/active.img';
export const PASSIVE_IMAGE_FILE = 'cOS/passive.img';
/** Where the booted node has COS_STATE (read-only; Elemental's initramfs and ours mount it there). */
export const COS_STATE_MOUNT = '/run/initramfs/cos-state';

/** Node paths on COS_OEM (read-write at boot): what the upgrade recorded, and what hvagent concluded. */
export const UPGRADE_RECORD_PATH = '/oem/hvinstall/upgrade.json';
export const ASSESSMENT_RECORD_PATH = '/oem/hvinstall/assessment.json';

export const STATE_VAR = 'hv_assessment_state';
export const ENABLED_VAR = 'hv_assessment_enabled';
export const ELEMENTAL_ARM_VAR = 'enable_boot_assessment';

export type AssessmentState = '' | 'armed' | 'trying' | 'fallback';
export const ASSESSMENT_STATES: readonly AssessmentState[] = ['', 'armed', 'trying', 'fallback'];

/** Kernel-line markers grub adds; hvagent reads them from /proc/cmdline. */
export const ATTEMPT_MARKER = 'hv.assessment=attempt';
export const FALLBACK_MARKER = 'hv.assessment=fallback';
/**
 * The attempt's kernel arguments: every failure before hvagent's verdict comes back to grub
 * (Elemental v1's set: dracut's emergency and shell, a panic, a crashed PID 1), and the marker.
 * The fallback gets no reboot argument, so an unhealthy previous image stays up (panic=0 halts).
 */
export const ATTEMPT_ARGS = `rd.emergency=reboot rd.shell=0 panic=5 systemd.crash_reboot systemd.crash_shell=0 ${ATTEMPT_MARKER}`;
/** `upgrade_failure` is Elemental v1's marker (its boot.before writes /run/cos/upgrade_failure). */
export const FALLBACK_ARGS = `upgrade_failure ${FALLBACK_MARKER}`;

/** The environment an install writes: enabled, nothing pending. */
export function installAssessmentEnv(): Record<string, string> {
  return { [ENABLED_VAR]: 'yes', [STATE_VAR]: '' };
}

/** Menu entry ids of a grub.cfg: Elemental's (the image's chain) or hvinstall's own. */
export interface ChainEntries {
  active: string;
  fallback: string;
  recovery: string;
}
export const IMAGE_CHAIN_ENTRIES: ChainEntries = { active: 'cos', fallback: 'fallback', recovery: 'recovery' };
export const OWN_CHAIN_ENTRIES: ChainEntries = { active: 'active', fallback: 'passive', recovery: 'recovery' };

/**
 * COS_STATE/hv_assessment.cfg: the state machine, run by grub after the menu entries are defined
 * and before the menu, with $root on COS_STATE. Its only effects on a boot are `default`,
 * `fallback` and the appended kernel arguments, and only while armed, trying or fallback.
 * Each write is read back: a grub that cannot write COS_STATE ("diskfilter writes are not
 * supported" on LVM or RAID) must not boot an attempt it cannot count, or it would loop.
 */
export function renderAssessmentScript(): string {
  const env = `\${hv_assessment_dir}/${ASSESSMENT_ENV_FILE}`;
  const el = `\${hv_assessment_dir}/${ELEMENTAL_ASSESSMENT_ENV_FILE}`;
  return `# hvinstall boot assessment (docs/upgrade.md). Sourced from grubcustom with hv_active_entry,
# hv_fallback_entry, hv_recovery_entry and hv_assessment_dir (COS_STATE; empty: $root) set.
# It changes nothing unless an upgrade armed it.
set ${STATE_VAR}=""
set ${ENABLED_VAR}=""
set ${ELEMENTAL_ARM_VAR}=""
if [ -f "${env}" ]; then
  load_env -f "${env}" ${STATE_VAR} ${ENABLED_VAR}
fi
if [ -f "${el}" ]; then
  load_env -f "${el}" ${ELEMENTAL_ARM_VAR}
fi
if [ "\${${ENABLED_VAR}}" = "yes" -a -z "\${selected_entry}" ]; then
  if [ -z "\${${STATE_VAR}}" -a "\${${ELEMENTAL_ARM_VAR}}" = "yes" ]; then
    # elemental upgrade armed it: adopt the attempt, and clear Elemental's flag so it is adopted once.
    set ${STATE_VAR}="armed"
    save_env -f "${env}" ${STATE_VAR}
    set ${ELEMENTAL_ARM_VAR}=""
    save_env -f "${el}" ${ELEMENTAL_ARM_VAR}
  fi
  if [ "\${${STATE_VAR}}" = "armed" ]; then
    set ${STATE_VAR}="trying"
    save_env -f "${env}" ${STATE_VAR}
    set ${STATE_VAR}=""
    load_env -f "${env}" ${STATE_VAR}
    if [ "\${${STATE_VAR}}" = "trying" ]; then
      echo "hvinstall: boot assessment: trying the upgraded image once; a failure boots the previous one"
      set default="\${hv_active_entry}"
      set hv_assessment_active_args="${ATTEMPT_ARGS}"
      set extra_active_cmdline="\${extra_active_cmdline} \${hv_assessment_active_args}"
    else
      echo "hvinstall: boot assessment: cannot write ${env} on COS_STATE: booting the upgraded image unassessed"
    fi
  elif [ "\${${STATE_VAR}}" = "trying" -o "\${${STATE_VAR}}" = "fallback" ]; then
    if [ "\${${STATE_VAR}}" = "trying" ]; then
      set ${STATE_VAR}="fallback"
      save_env -f "${env}" ${STATE_VAR}
    fi
    echo "hvinstall: boot assessment: the upgraded image failed its attempt: booting the previous image"
    set default="\${hv_fallback_entry}"
    set fallback="\${hv_recovery_entry}"
    set hv_assessment_passive_args="${FALLBACK_ARGS}"
    set extra_passive_cmdline="\${extra_passive_cmdline} \${hv_assessment_passive_args}"
  fi
fi
`;
}

/**
 * The lines that run the script, for COS_STATE/grubcustom (the image's chain, after Harvester's
 * debug entry; `dir` empty: COS_STATE is $root there) or hvinstall's own grub.cfg (`dir` the grub
 * device of COS_STATE). The comment names Elemental v1's hook on purpose:
 * its after-upgrade stage appends that hook only when grubcustom does not mention it, and the
 * hook would overwrite extra_active_cmdline and count a boot good as soon as yip's boot.before ran.
 */
export function renderAssessmentHook(entries: ChainEntries, dir = ''): string {
  const script = `\${hv_assessment_dir}/${ASSESSMENT_SCRIPT_FILE}`;
  return `# hvinstall boot assessment (docs/upgrade.md): it replaces Elemental's grub_boot_assessment hook.
set hv_assessment_dir="${dir}"
set hv_active_entry="${entries.active}"
set hv_fallback_entry="${entries.fallback}"
set hv_recovery_entry="${entries.recovery}"
if [ -f "${script}" ]; then
  source "${script}"
fi
`;
}

/** /oem/hvinstall/upgrade.json: what the last upgrade replaced by what (hvinstall upgrade writes it). */
export interface UpgradeRecord {
  version: 1;
  at: string;
  from: { name: string; digest: string };
  to: { name: string; digest: string; source: string; sourceDigest: string };
  armed: boolean;
}

/** A name for an image from its os-release: PRETTY_NAME and IMAGE_VERSION when it has one. Pure. */
export function imageName(osRelease: string): string {
  const get = (k: string): string | undefined => {
    let v: string | undefined;
    for (const line of osRelease.split('\n')) {
      const m = new RegExp(`^${k}=(.*)$`).exec(line.trim());
      if (m) v = m[1]!.replace(/^(["'])(.*)\1$/, '$2');
    }
    return v;
  };
  const pretty = get('PRETTY_NAME') ?? get('NAME') ?? 'unnamed image';
  const version = get('IMAGE_VERSION');
  return version && !pretty.includes(version) ? `${pretty} (image ${version})` : pretty;
}

/** Which image the kernel line says was booted (`cos-img/filename=`; the last one wins, as in dracut). Pure. */
export function bootedImage(cmdline: string): 'active' | 'passive' | 'recovery' | undefined {
  let img: string | undefined;
  for (const arg of cmdline.trim().split(/\s+/)) if (arg.startsWith('cos-img/filename=')) img = arg.slice('cos-img/filename='.length);
  if (!img) return undefined;
  if (img.endsWith('/active.img')) return 'active';
  if (img.endsWith('/passive.img')) return 'passive';
  if (img.endsWith('/recovery.img')) return 'recovery';
  return undefined;
}
