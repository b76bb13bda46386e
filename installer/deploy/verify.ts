import { readFile, stat } from 'node:fs/promises';
import path from 'node:path';
import { Sha256Pool } from './hash-pool.js';
import { readBackDigests, readBackProblem, type ExpectedImage } from './read-back.js';
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
  const checks: ImageCheck[] = [];
  const toRead: Array<{ at: number; expected: ExpectedImage }> = [];
  for (const [root, img, device] of [
    [stateDir, state.active, devices.state],
    [stateDir, state.passive, devices.state],
    [recoveryDir, state.recovery, devices.recovery],
  ] as const) {
    const file = path.join(root, img.file);
    const st = await stat(file).catch(() => undefined);
    const problem = !st ? 'missing' : st.size !== img.sizeBytes ? `size ${st.size}, expected ${img.sizeBytes}` : undefined;
    checks.push({ file, label: img.label, expectedDigest: img.digest, ok: false, ...(problem ? { problem } : {}) });
    if (!problem) toRead.push({ at: checks.length - 1, expected: { path: file, name: img.file, sizeBytes: img.sizeBytes, digest: img.digest, ...(device ? { device } : {}) } });
  }
  if (toRead.length === 0) return checks;
  // Together: passive and recovery are active's bytes but for their labels (read-back.ts).
  const pool = new Sha256Pool();
  try {
    const got = await readBackDigests(toRead.map((r) => r.expected.path), { pool, signal });
    for (const [k, { at, expected }] of toRead.entries()) {
      const bad = await readBackProblem(expected, got[k]!, expected.device);
      checks[at] = { ...checks[at]!, actualDigest: got[k]!.digest, ok: !bad, ...(bad ? { problem: bad.message } : {}) };
    }
    return checks;
  } finally {
    await pool.close();
  }
}
