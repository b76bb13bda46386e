import { readFile, stat } from 'node:fs/promises';
import path from 'node:path';
import { Sha256Pool } from './hash-pool.js';
import { readBackImage, ReadBackMismatch } from './read-back.js';
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
 * Reads every image recorded in COS_STATE's state.yaml back from the disk (read-back.ts: not the
 * page cache) and compares its digest (and size) with the record. For resume, upgrades and
 * operators; the digest is reproducible with coreutils (see node/image-digest.ts). devices names the
 * partitions in the problems.
 */
export async function verifyDeployment(stateDir: string, recoveryDir: string, signal?: AbortSignal, devices: { state?: string; recovery?: string } = {}): Promise<ImageCheck[]> {
  const text = await readFile(path.join(stateDir, STATE_FILE), 'utf8').catch(() => undefined);
  const state = text === undefined ? undefined : parseStateYaml(text);
  if (!state) {
    return [{ file: path.join(stateDir, STATE_FILE), label: '', expectedDigest: '', ok: false, problem: 'state.yaml is missing or unreadable' }];
  }
  const pool = new Sha256Pool();
  try {
    const checks: ImageCheck[] = [];
    for (const [root, img, device] of [
      [stateDir, state.active, devices.state],
      [stateDir, state.passive, devices.state],
      [recoveryDir, state.recovery, devices.recovery],
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
      try {
        const actual = await readBackImage({ path: file, name: img.file, sizeBytes: img.sizeBytes, digest: img.digest }, { pool, device, signal });
        checks.push({ ...base, actualDigest: actual, ok: true });
      } catch (err) {
        if (!(err instanceof ReadBackMismatch)) throw err;
        checks.push({ ...base, ok: false, problem: err.message });
      }
    }
    return checks;
  } finally {
    await pool.close();
  }
}
