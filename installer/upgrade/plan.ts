/**
 * `hvinstall upgrade`'s decisions, pure over what was read from the node: whether it may upgrade
 * now, what each step will do, and whether the next boot is assessed. Elemental's upgrade
 * (rancher/elemental-toolkit v1.1.8 pkg/action/upgrade.go) always moves active.img over
 * passive.img, whichever image runs; so an upgrade while an attempt is pending or a fallback is
 * not yet committed would make an untried or a failed image the node's fallback: refused.
 */
import { ASSESSMENT_SCRIPT_FILE, ENABLED_VAR, STATE_VAR } from '../../node/boot-assessment.js';

export interface UpgradeFacts {
  stateDevice: string;
  oemDevice: string;
  /** COS_STATE/hv_assessment's variables; undefined when the node has none (installed before it). */
  assessment?: Record<string, string>;
  grubCfg: string;
  grubcustom: string;
  files: { active: boolean; passive: boolean; failed: boolean; transition: boolean };
  /** The image this machine booted (from /proc/cmdline) when it is the node itself; undefined with --device. */
  booted?: 'active' | 'passive' | 'recovery';
}

export type HookAction = 'present' | 'add-to-grubcustom' | 'unsupported';

export interface UpgradePlan {
  source: string;
  stateDevice: string;
  oemDevice: string;
  steps: Array<{ name: 'build' | 'switch' | 'arm'; what: string }>;
  hook: HookAction;
  /** The next boot is assessed (armed); false: it boots the new image plainly, and `why`. */
  arm: boolean;
  armWhy: string;
  refusals: string[];
  notes: string[];
}

/** Where the assessment hook is: hvinstall's grub.cfg runs it, or COS_STATE/grubcustom (Elemental's grub.cfg). Pure. */
export function hookAction(grubCfg: string, grubcustom: string): HookAction {
  if (grubCfg.includes(ASSESSMENT_SCRIPT_FILE) || grubcustom.includes(ASSESSMENT_SCRIPT_FILE)) return 'present';
  // Elemental's grub.cfg sources COS_STATE/grubcustom after its entries (custom_file="/grubcustom").
  if (/--id\s+fallback\b/.test(grubCfg) && /custom_file|grubcustom/.test(grubCfg)) return 'add-to-grubcustom';
  return 'unsupported';
}

function refusals(f: UpgradeFacts): string[] {
  const out: string[] = [];
  const state = f.assessment?.[STATE_VAR] ?? '';
  if (state === 'armed') out.push('the last upgrade has not been booted yet (boot assessment armed): upgrading again would make that untried image the fallback; reboot into it first, or cancel it with `hvagent assessment disarm`');
  if (state === 'trying') out.push('the upgraded image is being tried (boot assessment: trying): wait for hvagent to commit it or fall back (hvagent status), then upgrade');
  if (state === 'fallback') out.push('the last upgrade failed and the node fell back, but the fallback is not committed yet: boot the node so hvagent commits it (it makes the previous image active.img again), then upgrade');
  if (f.booted === 'passive') out.push('this node runs passive.img: an upgrade moves active.img, not the running image, to passive.img; boot active.img (or let hvagent commit the fallback) first');
  if (!f.files.active) out.push('COS_STATE has no cOS/active.img: this is not an installed node (or its install did not finish)');
  return out;
}

/** The plan, with every refusal and note; `refusals` empty means the upgrade may run. Pure. */
export function planUpgrade(source: string, f: UpgradeFacts): UpgradePlan {
  const hook = hookAction(f.grubCfg, f.grubcustom);
  const enabled = f.assessment ? f.assessment[ENABLED_VAR] === 'yes' : true;
  const arm = enabled && hook !== 'unsupported';
  const armWhy = !enabled
    ? 'boot assessment is disabled on this node (`hvagent assessment arm` enables it): the new image boots unassessed'
    : hook === 'unsupported'
      ? "the node's grub.cfg has no boot-assessment hook and is not Elemental's (it sources no grubcustom): the new image boots unassessed; reinstall with this hvinstall to arm it"
      : 'the next boot tries the new image once; hvagent commits it when healthy, else grub boots the previous image';
  const notes: string[] = [];
  if (f.files.failed) notes.push('cOS/failed.img (an image that failed its attempt, kept for diagnosis) is removed first');
  if (f.files.transition) notes.push('cOS/transition.img from an earlier run is kept if it is this source\'s, else rebuilt');
  if (!f.assessment) notes.push('COS_STATE has no boot-assessment state yet (installed before it): the script and its environment are written');
  if (hook === 'add-to-grubcustom') notes.push("the assessment hook is added to COS_STATE/grubcustom (Elemental's grub.cfg sources it)");
  return {
    source,
    stateDevice: f.stateDevice,
    oemDevice: f.oemDevice,
    hook,
    arm,
    armWhy,
    refusals: refusals(f),
    notes,
    steps: [
      { name: 'build', what: `build cOS/transition.img (ext2, COS_ACTIVE) on ${f.stateDevice} from ${source}, digest read back` },
      { name: 'switch', what: `cOS/active.img -> cOS/passive.img (COS_PASSIVE), cOS/transition.img -> cOS/active.img, state.yaml (and its copy on COS_RECOVERY)` },
      { name: 'arm', what: arm ? 'arm boot assessment for the next boot (COS_STATE/hv_assessment), record the upgrade in /oem/hvinstall/upgrade.json' : `record the upgrade in /oem/hvinstall/upgrade.json; not armed: ${armWhy}` },
    ],
  };
}

/** The plan as `--dry-run` prints it. Pure. */
export function formatUpgradePlan(p: UpgradePlan): string {
  const lines = [`hvinstall upgrade: ${p.source}`, `  COS_STATE ${p.stateDevice}, COS_OEM ${p.oemDevice}`, '  steps:'];
  p.steps.forEach((s, i) => lines.push(`    ${i + 1}. ${s.name}: ${s.what}`));
  lines.push(`  boot assessment: ${p.arm ? 'armed' : 'not armed'}: ${p.armWhy}`);
  for (const n of p.notes) lines.push(`  note: ${n}`);
  for (const r of p.refusals) lines.push(`  REFUSED: ${r}`);
  return lines.join('\n') + '\n';
}
