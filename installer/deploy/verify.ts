import { readFile, stat } from 'node:fs/promises';
import path from 'node:path';
import { sha256File } from './checksum.js';
import { parseStateYaml, STATE_FILE } from './state-file.js';

export interface ImageCheck {
  file: string;
  label: string;
  expectedSha256: string;
  actualSha256?: string;
  ok: boolean;
  problem?: string;
}

/**
 * Re-reads every image recorded in COS_STATE's state.yaml and compares its sha256 (and size)
 * with the record. For the install's final check and for operators (`sha256sum` gives the same).
 */
export async function verifyDeployment(stateDir: string, recoveryDir: string, signal?: AbortSignal): Promise<ImageCheck[]> {
  const text = await readFile(path.join(stateDir, STATE_FILE), 'utf8').catch(() => undefined);
  const state = text === undefined ? undefined : parseStateYaml(text);
  if (!state) {
    return [{ file: path.join(stateDir, STATE_FILE), label: '', expectedSha256: '', ok: false, problem: 'state.yaml is missing or unreadable' }];
  }
  const checks: ImageCheck[] = [];
  for (const [root, img] of [
    [stateDir, state.active],
    [stateDir, state.passive],
    [recoveryDir, state.recovery],
  ] as const) {
    const file = path.join(root, img.file);
    const st = await stat(file).catch(() => undefined);
    if (!st) {
      checks.push({ file, label: img.label, expectedSha256: img.sha256, ok: false, problem: 'missing' });
      continue;
    }
    if (st.size !== img.sizeBytes) {
      checks.push({ file, label: img.label, expectedSha256: img.sha256, ok: false, problem: `size ${st.size}, expected ${img.sizeBytes}` });
      continue;
    }
    const actual = await sha256File(file, { signal });
    checks.push({
      file,
      label: img.label,
      expectedSha256: img.sha256,
      actualSha256: actual,
      ok: actual === img.sha256,
      problem: actual === img.sha256 ? undefined : `sha256 ${actual}, expected ${img.sha256}`,
    });
  }
  return checks;
}
