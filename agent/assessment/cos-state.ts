/**
 * hvagent's writes to COS_STATE: the grub environment, and a fallback made permanent. COS_STATE is
 * mounted read-only on a booted node; it is remounted read-write around each change and back, as
 * Elemental v1's boot assessment does. The commit of a fallback is ordered so that a power cut at
 * any point leaves grub a good image to boot: the failed image moves aside, the previous image gets
 * a second name active.img (a hard link), the state says "nothing pending", and only then the name
 * passive.img goes.
 */
import { link, readFile, rename, stat, unlink } from 'node:fs/promises';
import path from 'node:path';
import { fsyncDir, writeFileAtomic } from '../../lib/atomic-write.js';
import { run } from '../../lib/exec.js';
import { sleep } from '../../lib/wait.js';
import { ACTIVE_IMAGE_FILE, ASSESSMENT_ENV_FILE, ELEMENTAL_ARM_VAR, ELEMENTAL_ASSESSMENT_ENV_FILE, FAILED_IMAGE_FILE, PASSIVE_IMAGE_FILE, STATE_VAR } from '../../node/boot-assessment.js';
import { readGrubenvFile, writeGrubenvFile } from '../../node/grubenv.js';
import { fileChunkDigest } from '../../node/image-digest.js';
import { committedFallbackStateYaml } from '../../node/state-yaml.js';

export interface CosState {
  dir: string;
  /** Runs fn with COS_STATE writable (remounted when it is a read-only mount), then puts it back. */
  writable<T>(fn: () => Promise<T>): Promise<T>;
}

/** COS_STATE at `dir`; `remount` false in tests (a plain directory). */
export function cosState(dir: string, remount: boolean): CosState {
  return {
    dir,
    async writable(fn) {
      if (!remount) return fn();
      const ro = (await run('findmnt', ['-no', 'OPTIONS', '--mountpoint', dir], { allowFailure: true })).stdout.split(',').includes('ro');
      if (ro) await run('mount', ['-o', 'remount,rw', dir]);
      try {
        return await fn();
      } finally {
        await run('sync', ['-f', dir], { allowFailure: true });
        if (ro) await run('mount', ['-o', 'remount,ro', dir], { allowFailure: true });
      }
    },
  };
}

/** How long a block that does not parse is read again: grub2-editenv rewrites the file in place (truncate, then write), so a read can fall between the two. */
const TORN_READ_MS = 1_000;
const TORN_RETRY_MS = 50;

/** The assessment's environment block (undefined: no file). A block still unreadable after TORN_READ_MS is an error naming the file. */
export async function readAssessmentEnv(s: CosState): Promise<Record<string, string> | undefined> {
  const file = path.join(s.dir, ASSESSMENT_ENV_FILE);
  const deadline = Date.now() + TORN_READ_MS;
  for (;;) {
    try {
      return await readGrubenvFile(file);
    } catch (err) {
      if (Date.now() >= deadline) throw new Error(`${file}: ${(err as Error).message}, for ${TORN_READ_MS / 1000} s (not a write in progress): recreate it with grub2-editenv ${file} create, then set ${STATE_VAR} again`);
    }
    await sleep(TORN_RETRY_MS);
  }
}

export async function setAssessmentEnv(s: CosState, changes: Record<string, string | undefined>): Promise<void> {
  await s.writable(async () => {
    await writeGrubenvFile(path.join(s.dir, ASSESSMENT_ENV_FILE), changes);
  });
}

const ino = (f: string): Promise<number | undefined> => stat(f).then((st) => st.ino, () => undefined);

/** The upgraded image passed: nothing pending, the last failed image (if any) and Elemental's flag gone. */
export async function commitUpgrade(s: CosState): Promise<void> {
  await s.writable(async () => {
    await writeGrubenvFile(path.join(s.dir, ASSESSMENT_ENV_FILE), { [STATE_VAR]: '' });
    const el = path.join(s.dir, ELEMENTAL_ASSESSMENT_ENV_FILE);
    if (await readGrubenvFile(el)) await writeGrubenvFile(el, { [ELEMENTAL_ARM_VAR]: '' });
    await unlink(path.join(s.dir, FAILED_IMAGE_FILE)).catch(() => undefined);
  });
}

/**
 * The fallback made permanent: active.img (the failed image) -> failed.img, passive.img (the
 * running previous image) -> active.img relabelled COS_ACTIVE, state.yaml, nothing pending.
 * Idempotent: a re-run after a power cut at any step finishes the rest. Returns what it did.
 */
export async function commitFallback(s: CosState, signal?: AbortSignal): Promise<string[]> {
  const at = (f: string): string => path.join(s.dir, f);
  const did: string[] = [];
  return s.writable(async () => {
    const [a, p] = [await ino(at(ACTIVE_IMAGE_FILE)), await ino(at(PASSIVE_IMAGE_FILE))];
    if (a !== undefined && p !== undefined && a !== p) {
      await rename(at(ACTIVE_IMAGE_FILE), at(FAILED_IMAGE_FILE));
      did.push('cOS/active.img (the failed image) -> cOS/failed.img');
    }
    if ((await ino(at(ACTIVE_IMAGE_FILE))) === undefined && p !== undefined) {
      await link(at(PASSIVE_IMAGE_FILE), at(ACTIVE_IMAGE_FILE));
      await fsyncDir(at('cOS'));
      did.push('cOS/passive.img (the running image) linked as cOS/active.img');
    }
    if (p !== undefined && (await ino(at(ACTIVE_IMAGE_FILE))) === p) {
      await run('tune2fs', ['-L', 'COS_ACTIVE', at(ACTIVE_IMAGE_FILE)]);
      const { digest, chunks, chunksRead } = await fileChunkDigest(at(ACTIVE_IMAGE_FILE), signal);
      const yaml = await readFile(at('state.yaml'), 'utf8').catch(() => undefined);
      if (yaml !== undefined) await writeFileAtomic(at('state.yaml'), committedFallbackStateYaml(yaml, digest, new Date().toISOString()));
      did.push(
        chunksRead === chunks
          ? `cOS/active.img digested: all ${chunks} of its 4 MiB chunks read`
          : `cOS/active.img digested: ${chunksRead} of its ${chunks} 4 MiB chunks read, the other ${chunks - chunksRead} holes (no data on disk)`,
      );
      await writeGrubenvFile(at(ASSESSMENT_ENV_FILE), { [STATE_VAR]: '' });
      await unlink(at(PASSIVE_IMAGE_FILE));
      await fsyncDir(at('cOS'));
      did.push('relabelled COS_ACTIVE, state.yaml updated, nothing pending, the name passive.img removed');
    }
    return did;
  });
}

/** A commit cut short after "nothing pending" leaves passive.img a second name of active.img: drop it. */
export async function tidyCommittedFallback(s: CosState): Promise<boolean> {
  const at = (f: string): string => path.join(s.dir, f);
  const p = await ino(at(PASSIVE_IMAGE_FILE));
  if (p === undefined || p !== (await ino(at(ACTIVE_IMAGE_FILE)))) return false;
  await s.writable(() => unlink(at(PASSIVE_IMAGE_FILE)));
  return true;
}
