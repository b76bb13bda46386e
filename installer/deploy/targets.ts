/**
 * The three images deploy writes, where they go, and what a finished one leaves beside it: a
 * sidecar with the digests it was verified against, so a re-run can keep it after reading it back.
 */
import { readFile, rm, stat } from 'node:fs/promises';
import path from 'node:path';
import type { DeployRequest, ImageRecord } from '../disk/contracts.js';
import type { Sha256Pool } from './hash-pool.js';
import { readBackDigests } from './read-back.js';

export type Role = 'active' | 'passive' | 'recovery';

export interface Target {
  role: Role;
  /** Partition mount (COS_STATE or COS_RECOVERY). */
  root: string;
  /** The partition's device, for messages. */
  device?: string;
  file: string;
  label: ImageRecord['label'];
}

/** The record kept next to each finished image: what it was built from and read back as. */
export interface Sidecar {
  sourceDigest: string;
  /** The source's content digest (source-digest.ts) the image's tree was checked against. */
  contentDigest: string;
  sizeBytes: number;
  label: string;
  digest: string;
  chunks: string[];
}

/** What a finished image must be to be kept: built from this source, this size. */
export interface KeepWhen {
  sourceDigest: string;
  contentDigest: string;
  sizeBytes: number;
}

export const abs = (t: Target): string => path.join(t.root, t.file);
export const partialOf = (t: Target): string => path.join(t.root, 'cOS', `.${path.basename(t.file)}.partial`);
export const sidecarOf = (t: Target): string => path.join(t.root, 'cOS', `.${path.basename(t.file)}.deploy.json`);

export function imageTargets(req: DeployRequest): Record<Role, Target> {
  return {
    active: { role: 'active', root: req.stateDir, device: req.stateDevice, file: 'cOS/active.img', label: 'COS_ACTIVE' },
    passive: { role: 'passive', root: req.stateDir, device: req.stateDevice, file: 'cOS/passive.img', label: 'COS_PASSIVE' },
    recovery: { role: 'recovery', root: req.recoveryDir, device: req.recoveryDevice, file: 'cOS/recovery.img', label: 'COS_SYSTEM' },
  };
}

/**
 * The images an earlier run finished for this same source, read back from the disk against their
 * sidecars (by content, never by size alone; read together, see read-back.ts); every other image
 * and its sidecar is removed.
 */
export async function keepVerifiedImages(targets: Record<Role, Target>, want: KeepWhen, pool: Sha256Pool, signal?: AbortSignal): Promise<Map<Role, Sidecar>> {
  const candidates: Array<{ t: Target; side: Sidecar }> = [];
  for (const t of Object.values(targets)) {
    const side = await matchingSidecar(t, want);
    if (side && (await stat(abs(t)).catch(() => undefined))) candidates.push({ t, side });
  }
  const got = candidates.length === 0 ? [] : await readBackDigests(candidates.map((c) => abs(c.t)), { pool, signal });
  const kept = new Map<Role, Sidecar>();
  for (const [k, { t, side }] of candidates.entries()) {
    if (got[k]!.sizeBytes === side.sizeBytes && got[k]!.digest === side.digest) kept.set(t.role, side);
  }
  for (const t of Object.values(targets)) {
    if (!kept.has(t.role)) await Promise.all([rm(abs(t), { force: true }), rm(sidecarOf(t), { force: true })]);
  }
  return kept;
}

/** The image's sidecar when it records this source, this size and the target's label. */
async function matchingSidecar(t: Target, want: KeepWhen): Promise<Sidecar | undefined> {
  let side: Sidecar;
  try {
    side = JSON.parse(await readFile(sidecarOf(t), 'utf8')) as Sidecar;
  } catch {
    return undefined;
  }
  if (side.sourceDigest !== want.sourceDigest || side.contentDigest !== want.contentDigest || side.sizeBytes !== want.sizeBytes || side.label !== t.label) return undefined;
  return side;
}
