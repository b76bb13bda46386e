/**
 * COS_RECOVERY's copy of state.yaml. Elemental keeps one state.yaml on COS_STATE and the same
 * document on COS_RECOVERY, and writes both at every change (rancher/elemental-toolkit v1.1.8
 * pkg/action/upgrade.go upgradeInstallStateYaml -> WriteInstallState(state, statePath,
 * recoveryPath)); the install writes both (installer/deploy). An upgrade's switch and hvagent's
 * commits copy COS_STATE's over the recovery one, so a recovery boot reads what the disk holds.
 */
import { readFile } from 'node:fs/promises';
import path from 'node:path';
import { writeFileAtomic } from '../lib/atomic-write.js';

export const STATE_YAML_FILE = 'state.yaml';

/**
 * Makes `recoveryDir`'s state.yaml the same bytes as `stateDir`'s: written atomically when it
 * differs, then `readBack` checks what the disk holds. Nothing to copy when COS_STATE has none.
 * Returns what it did, in words.
 */
export async function copyStateYamlToRecovery(stateDir: string, recoveryDir: string, readBack: (file: string, text: string) => Promise<void>): Promise<string> {
  const text = await readFile(path.join(stateDir, STATE_YAML_FILE), 'utf8').catch(() => undefined);
  if (text === undefined) return 'COS_STATE has no state.yaml: no copy for COS_RECOVERY';
  const file = path.join(recoveryDir, STATE_YAML_FILE);
  const copy = await readFile(file, 'utf8').catch(() => undefined);
  if (copy === text) return "COS_RECOVERY's state.yaml already matches COS_STATE's";
  await writeFileAtomic(file, text, { mkdirs: false });
  await readBack(file, text);
  return "COS_RECOVERY's state.yaml updated to COS_STATE's (read back)";
}
