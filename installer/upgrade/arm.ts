/**
 * After the switch: the boot assessment armed for the next boot (its script refreshed, the hook
 * added where an Elemental grub.cfg will source it) and the upgrade recorded on COS_OEM, so hvagent
 * can say which image failed if the node falls back.
 */
import { readFile } from 'node:fs/promises';
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
  STATE_VAR,
  UPGRADE_RECORD_PATH,
  type UpgradeRecord,
} from '../../node/boot-assessment.js';
import { readGrubenvFile, writeGrubenvFile } from '../../node/grubenv.js';
import type { UpgradePlan } from './plan.js';

export async function armAssessment(stateDir: string, plan: UpgradePlan): Promise<string[]> {
  const done: string[] = [];
  if (plan.hook === 'unsupported') return done;
  await writeFileAtomic(path.join(stateDir, ASSESSMENT_SCRIPT_FILE), renderAssessmentScript());
  if (plan.hook === 'add-to-grubcustom') {
    const file = path.join(stateDir, STATE_GRUBCUSTOM_FILE);
    const current = await readFile(file, 'utf8').catch(() => '');
    if (!current.includes(ASSESSMENT_SCRIPT_FILE)) {
      await writeFileAtomic(file, `${current}${current && !current.endsWith('\n') ? '\n' : ''}${renderAssessmentHook(IMAGE_CHAIN_ENTRIES)}`);
      done.push('boot-assessment hook added to COS_STATE/grubcustom');
    }
  }
  const envFile = path.join(stateDir, ASSESSMENT_ENV_FILE);
  const base = (await readGrubenvFile(envFile)) ?? installAssessmentEnv();
  await writeGrubenvFile(envFile, { ...base, [STATE_VAR]: plan.arm ? 'armed' : (base[STATE_VAR] ?? '') });
  if (plan.arm) done.push('boot assessment armed: the next boot tries the new image once');
  return done;
}

/** /oem/hvinstall/upgrade.json, replaced whole. */
export async function writeUpgradeRecord(oemDir: string, record: UpgradeRecord): Promise<void> {
  await writeFileAtomic(path.join(oemDir, path.relative('/oem', UPGRADE_RECORD_PATH)), JSON.stringify(record, null, 2) + '\n');
}
