/**
 * Arms boot assessment at install (node/boot-assessment.ts, docs/upgrade.md): the grub script and
 * its environment on COS_STATE, so the first upgrade is guarded whoever performs it. Harvester's
 * installer overwrites COS_STATE/grubcustom with its debug entry, which drops Elemental's hook
 * until the first upgrade; here the hook is written beside that entry from the start.
 */
import path from 'node:path';
import { writeFileAtomic } from '../../lib/atomic-write.js';
import {
  ASSESSMENT_ENV_FILE,
  ASSESSMENT_SCRIPT_FILE,
  IMAGE_CHAIN_ENTRIES,
  installAssessmentEnv,
  renderAssessmentHook,
  renderAssessmentScript,
  STATE_GRUBCUSTOM_FILE,
} from '../../node/boot-assessment.js';

/** COS_STATE/grubcustom of the image's chain: Harvester's debug entry, then the assessment hook. */
export function renderStateGrubcustom(debugEntry: string): string {
  return `${debugEntry}\n${renderAssessmentHook(IMAGE_CHAIN_ENTRIES)}`;
}

/**
 * Writes COS_STATE/hv_assessment.cfg and a fresh COS_STATE/hv_assessment (enabled, nothing
 * pending), and for the image's chain COS_STATE/grubcustom with `debugEntry` and the hook.
 * `writeEnv` is the installer's grub-editenv writer, so the block is grub's own format.
 */
export async function writeBootAssessment(
  stateDir: string,
  writeEnv: (file: string, vars: Record<string, string>) => Promise<void>,
  debugEntry?: string,
): Promise<void> {
  await writeFileAtomic(path.join(stateDir, ASSESSMENT_SCRIPT_FILE), renderAssessmentScript());
  await writeEnv(path.join(stateDir, ASSESSMENT_ENV_FILE), installAssessmentEnv());
  if (debugEntry !== undefined) await writeFileAtomic(path.join(stateDir, STATE_GRUBCUSTOM_FILE), renderStateGrubcustom(debugEntry));
}
