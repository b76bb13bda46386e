/**
 * The A/B switch on COS_STATE, as `elemental upgrade` does it (rancher/elemental-toolkit v1.1.8
 * pkg/action/upgrade.go: `mv -f active.img passive.img`, `tune2fs -L COS_PASSIVE`, the new image
 * over active.img, state.yaml on COS_STATE and its copy on COS_RECOVERY), made resumable: every state a kill can leave is recognised from
 * the files and finished, never redone wrongly (the new image is never moved to passive.img).
 */
import { readFile, rename, rm, stat } from 'node:fs/promises';
import path from 'node:path';
import { ExitCode, HvError } from '../../lib/errors.js';
import { fsyncDir, writeFileAtomic } from '../../lib/atomic-write.js';
import { run } from '../../lib/exec.js';
import { imageDigest, readBackFile, sidecarPath, STATE_FILE } from '../deploy/index.js';
import type { ImageRecord } from '../disk/contracts.js';
import { ACTIVE_IMAGE_FILE, FAILED_IMAGE_FILE, PASSIVE_IMAGE_FILE } from '../../node/boot-assessment.js';
import { activeDigestOf, upgradedStateYaml } from '../../node/state-yaml.js';
import { copyStateYamlToRecovery } from '../../node/state-yaml-copy.js';
import { killIfAsked, TEST_KILL_ENV } from '../steps/test-faults.js';

export const TRANSITION_IMAGE_FILE = 'cOS/transition.img';

export interface SwitchRequest {
  stateDir: string;
  /** The built transition image (its digest identifies it on a resume). */
  image: ImageRecord;
  source: string;
  sourceDigest: string;
  /** COS_RECOVERY, whose state.yaml copy follows COS_STATE's (none: the disk has no recovery partition). */
  recovery?: { device: string; dir: string };
}

export interface SwitchResult {
  /** The digest of passive.img after its relabel (the old active image), or undefined when there was none. */
  passiveDigest?: string;
  /** What was done, for the journal and the log. */
  actions: string[];
}

const exists = (f: string): Promise<boolean> => stat(f).then(() => true, () => false);

/**
 * Moves the images. The transition image is renamed over active.img last, so while it exists the
 * switch has not happened; once it is gone, active.img is the new image (checked by digest after).
 */
async function moveImages(req: SwitchRequest, actions: string[]): Promise<void> {
  const at = (f: string): string => path.join(req.stateDir, f);
  if (!(await exists(at(TRANSITION_IMAGE_FILE)))) {
    actions.push('the images were already switched (a resumed upgrade)');
    return;
  }
  await rm(at(FAILED_IMAGE_FILE), { force: true });
  await rm(sidecarPath(req.stateDir, FAILED_IMAGE_FILE), { force: true });
  if (await exists(at(ACTIVE_IMAGE_FILE))) {
    await rename(at(ACTIVE_IMAGE_FILE), at(PASSIVE_IMAGE_FILE));
    await rm(sidecarPath(req.stateDir, PASSIVE_IMAGE_FILE), { force: true });
    actions.push('cOS/active.img -> cOS/passive.img');
    killIfAsked('upgrade:after-move-active', process.env[TEST_KILL_ENV]);
  }
  if (await exists(at(PASSIVE_IMAGE_FILE))) {
    await run('tune2fs', ['-L', 'COS_PASSIVE', at(PASSIVE_IMAGE_FILE)]);
    actions.push('cOS/passive.img relabelled COS_PASSIVE');
  }
  await rename(at(TRANSITION_IMAGE_FILE), at(ACTIVE_IMAGE_FILE));
  await rename(sidecarPath(req.stateDir, TRANSITION_IMAGE_FILE), sidecarPath(req.stateDir, ACTIVE_IMAGE_FILE)).catch(() => undefined);
  actions.push('cOS/transition.img -> cOS/active.img');
  await fsyncDir(path.join(req.stateDir, 'cOS'));
}

export async function switchImages(req: SwitchRequest, signal?: AbortSignal): Promise<SwitchResult> {
  const actions: string[] = [];
  await moveImages(req, actions);
  const active = path.join(req.stateDir, ACTIVE_IMAGE_FILE);
  const activeDigest = await imageDigest(active, { signal });
  if (activeDigest !== req.image.digest) {
    throw new HvError(`cOS/active.img reads back as ${activeDigest}, not the image built (${req.image.digest})`, {
      where: active,
      hint: 'the disk returned other data than was written: check dmesg for I/O errors; the previous image is cOS/passive.img',
      exitCode: ExitCode.installFailed,
    });
  }
  const passive = path.join(req.stateDir, PASSIVE_IMAGE_FILE);
  const passiveDigest = (await exists(passive)) ? await imageDigest(passive, { signal }) : undefined;
  const stateFile = path.join(req.stateDir, STATE_FILE);
  const text = await readFile(stateFile, 'utf8').catch(() => '');
  if (activeDigestOf(text) !== req.image.digest) {
    const entry = { source: req.source, sourceDigest: req.sourceDigest, sizeBytes: req.image.sizeBytes, digest: req.image.digest };
    await writeFileAtomic(stateFile, upgradedStateYaml(text || 'state: {label: COS_STATE}\n', entry, passiveDigest, new Date().toISOString()));
    actions.push('state.yaml: the new image active, the previous one passive');
  }
  // After COS_STATE's, and on a resume too: a kill between the two leaves only the copy behind.
  if (req.recovery) {
    const { device, dir } = req.recovery;
    actions.push(await copyStateYamlToRecovery(req.stateDir, dir, (file, text) => readBackFile(file, `COS_RECOVERY ${STATE_FILE}`, text, device)));
  }
  return { passiveDigest, actions };
}
