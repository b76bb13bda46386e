import { readFile, stat } from 'node:fs/promises';
import path from 'node:path';
import { Sha256Pool } from './hash-pool.js';
import { imageDigest } from './sparse-copy.js';
import { parseStateYaml, STATE_FILE } from './state-file.js';

export interface ImageCheck {
  file: string;
  label: string;
  expectedDigest: string;
  actualDigest?: string;
  ok: boolean;
  problem?: string;
}

/**
 * Re-reads every image recorded in COS_STATE's state.yaml and compares its digest (and size) with
 * the record. For the install's final check and for operators; the digest is reproducible with
 * coreutils (see chunk-digest.ts).
 */
export async function verifyDeployment(stateDir: string, recoveryDir: string, signal?: AbortSignal): Promise<ImageCheck[]> {
  const text = await readFile(path.join(stateDir, STATE_FILE), 'utf8').catch(() => undefined);
  const state = text === undefined ? undefined : parseStateYaml(text);
  if (!state) {
    return [{ file: path.join(stateDir, STATE_FILE), label: '', expectedDigest: '', ok: false, problem: 'state.yaml is missing or unreadable' }];
  }
  const pool = new Sha256Pool();
  try {
    const checks: ImageCheck[] = [];
    for (const [root, img] of [
      [stateDir, state.active],
      [stateDir, state.passive],
      [recoveryDir, state.recovery],
    ] as const) {
      const file = path.join(root, img.file);
      const base = { file, label: img.label, expectedDigest: img.digest };
      const st = await stat(file).catch(() => undefined);
      if (!st) {
        checks.push({ ...base, ok: false, problem: 'missing' });
        continue;
      }
      if (st.size !== img.sizeBytes) {
        checks.push({ ...base, ok: false, problem: `size ${st.size}, expected ${img.sizeBytes}` });
        continue;
      }
      const actual = await imageDigest(file, { signal, pool });
      const ok = actual === img.digest;
      checks.push({ ...base, actualDigest: actual, ok, problem: ok ? undefined : `digest ${actual}, expected ${img.digest}` });
    }
    return checks;
  } finally {
    await pool.close();
  }
}
