/**
 * The effects of a rotation: `rke2 certificate rotate` (RKE2's own command; it moves the server
 * certificates aside and RKE2 makes new ones at its next start) and the record that it ran, so a
 * restart of the agent or of the node never runs it again for the same expired certificates.
 * /var/lib/rancher persists across reboots and A/B upgrades.
 */
import { readFile } from 'node:fs/promises';
import { writeFileAtomic } from '../../lib/atomic-write.js';
import { run } from '../../lib/exec.js';
import type { RotationRecord } from './plan.js';

export const ROTATION_RECORD_PATH = '/var/lib/rancher/hvagent/certificate-rotation.json';

/** The record, or a problem (a broken record is reported; it then stops no rotate). Never throws. */
export async function loadRotationRecord(root: (p: string) => string, file = ROTATION_RECORD_PATH): Promise<{ record?: RotationRecord; problem?: string }> {
  let text: string;
  try {
    text = await readFile(root(file), 'utf8');
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return {};
    return { problem: `cannot read ${file}: ${(err as Error).message}` };
  }
  try {
    const o = JSON.parse(text) as Partial<RotationRecord>;
    const listOk = Array.isArray(o.expired) && o.expired.every((e) => e && typeof e.path === 'string' && typeof e.notAfter === 'string');
    if (o.version !== 1 || (o.outcome !== 'rotated' && o.outcome !== 'failed') || typeof o.at !== 'string' || !listOk) return { problem: `${file}: not a version 1 rotation record` };
    return { record: { version: 1, at: o.at, outcome: o.outcome, detail: String(o.detail ?? ''), expired: o.expired! } };
  } catch (err) {
    return { problem: `${file} is not JSON: ${(err as Error).message}` };
  }
}

export async function saveRotationRecord(root: (p: string) => string, record: RotationRecord, file = ROTATION_RECORD_PATH): Promise<void> {
  await writeFileAtomic(root(file), JSON.stringify(record, null, 2) + '\n', { mode: 0o644 });
}

export interface RotateCommand {
  binary: string;
  /** RKE2's data dir as the node knows it; under the agent's root for the command. */
  dataDir: string;
  env?: Record<string, string>;
  timeoutMs: number;
  signal?: AbortSignal;
}

/** Runs `rke2 certificate rotate --data-dir DIR`; the outcome, never a throw. */
export async function rotateCertificates(cmd: RotateCommand): Promise<{ outcome: RotationRecord['outcome']; detail: string }> {
  try {
    const r = await run(cmd.binary, ['certificate', 'rotate', '--data-dir', cmd.dataDir], { timeoutMs: cmd.timeoutMs, env: cmd.env, allowFailure: true, signal: cmd.signal });
    const lines = `${r.stdout}\n${r.stderr}`.trim().split('\n').filter((l) => l.trim());
    const last = lines.at(-1)?.trim() ?? '';
    if (r.exitCode !== 0) return { outcome: 'failed', detail: `${r.command} exited ${r.exitCode}${last ? `: ${last}` : ''}` };
    return { outcome: 'rotated', detail: last || 'exit 0' };
  } catch (err) {
    return { outcome: 'failed', detail: (err as Error).message };
  }
}
