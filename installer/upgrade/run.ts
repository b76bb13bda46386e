/**
 * `hvinstall upgrade`: facts → plan → journaled steps (build, switch, arm). The journal lives on
 * COS_STATE beside the images it describes, so a power cut cannot lose it while keeping them: a
 * re-run of the same upgrade resumes (the built image's digest carries over; the switch finishes
 * what it started), and the new image is never built twice into a switched node.
 */
import { readFile, stat } from 'node:fs/promises';
import path from 'node:path';
import { createHash } from 'node:crypto';
import { ExitCode, HvError } from '../../lib/errors.js';
import { writeFileAtomic } from '../../lib/atomic-write.js';
import type { Logger } from '../../lib/logger.js';
import { buildImageFile, type BuiltImage } from '../deploy/index.js';
import { ASSESSMENT_ENV_FILE, bootedImage, FAILED_IMAGE_FILE, imageName, STATE_GRUBCUSTOM_FILE, UPGRADE_RECORD_PATH, ACTIVE_IMAGE_FILE, PASSIVE_IMAGE_FILE, type UpgradeRecord } from '../../node/boot-assessment.js';
import { readGrubenvFile } from '../../node/grubenv.js';
import { activeDigestOf, activeSourceOf } from '../../node/state-yaml.js';
import { armAssessment, writeUpgradeRecord } from './arm.js';
import { formatUpgradePlan, planUpgrade, type UpgradeFacts, type UpgradePlan } from './plan.js';
import { openUpgradeSource, type UpgradeSource } from './source.js';
import { switchImages, TRANSITION_IMAGE_FILE } from './switch.js';
import { openTarget, type UpgradeTarget } from './target.js';

export const UPGRADE_JOURNAL_FILE = 'hvinstall-upgrade.json';
type StepName = 'build' | 'switch' | 'arm';

export interface UpgradeJournal {
  version: 1;
  key: string;
  source: string;
  status: 'running' | 'succeeded' | 'failed';
  startedAt: string;
  updatedAt: string;
  done: StepName[];
  /** The image being replaced, read before the switch. */
  from?: { name: string; digest: string };
  built?: { record: BuiltImage['record']; sourceDigest: string; name: string; uri: string };
  error?: string;
}

export interface UpgradeOptions {
  source: string;
  sha256?: string;
  caFile?: string;
  device?: string;
  systemSizeMiB?: number;
  dryRun: boolean;
  runDir: string;
  log: Logger;
  /** The kernel line of this machine (/proc/cmdline); ignored with --device. */
  cmdline?: string;
  signal?: AbortSignal;
}

const exists = (f: string): Promise<boolean> => stat(f).then(() => true, () => false);

async function readFacts(t: UpgradeTarget, opts: UpgradeOptions): Promise<UpgradeFacts> {
  const at = (f: string): string => path.join(t.stateDir, f);
  const text = (f: string): Promise<string> => readFile(at(f), 'utf8').catch(() => '');
  return {
    stateDevice: t.stateDevice,
    oemDevice: t.oemDevice,
    assessment: await readGrubenvFile(at(ASSESSMENT_ENV_FILE)),
    grubCfg: await text('grub2/grub.cfg'),
    grubcustom: await text(STATE_GRUBCUSTOM_FILE),
    files: { active: await exists(at(ACTIVE_IMAGE_FILE)), passive: await exists(at(PASSIVE_IMAGE_FILE)), failed: await exists(at(FAILED_IMAGE_FILE)), transition: await exists(at(TRANSITION_IMAGE_FILE)) },
    booted: opts.device ? undefined : bootedImage(opts.cmdline ?? ''),
  };
}

async function readJournal(stateDir: string): Promise<UpgradeJournal | undefined> {
  const t = await readFile(path.join(stateDir, UPGRADE_JOURNAL_FILE), 'utf8').catch(() => undefined);
  const j = t ? (JSON.parse(t) as UpgradeJournal) : undefined;
  return j?.version === 1 ? j : undefined;
}

/** The journal to go on with: this upgrade's unfinished one, or a new one. Refuses another's unfinished switch. */
function journalFor(previous: UpgradeJournal | undefined, key: string, source: string): UpgradeJournal {
  const now = new Date().toISOString();
  if (previous && previous.status !== 'succeeded' && previous.key === key) return { ...previous, status: 'running', updatedAt: now, error: undefined };
  if (previous && previous.status !== 'succeeded' && previous.done.includes('build') && !previous.done.includes('switch')) {
    throw new HvError(`an upgrade from ${previous.source} stopped in the middle of switching the images`, {
      where: `COS_STATE/${UPGRADE_JOURNAL_FILE}`,
      hint: `run that upgrade again to finish it (hvinstall upgrade --source ${previous.source}), then this one`,
      exitCode: ExitCode.checkFailed,
    });
  }
  return { version: 1, key, source, status: 'running', startedAt: now, updatedAt: now, done: [] };
}

function upgradeKey(stateDevice: string, opts: UpgradeOptions): string {
  return createHash('sha256').update(JSON.stringify([stateDevice, opts.source, opts.systemSizeMiB ?? null])).digest('hex').slice(0, 16);
}

export interface UpgradeOutcome {
  plan: UpgradePlan;
  journal?: UpgradeJournal;
}

/** Runs (or with dryRun only plans) an upgrade; throws HvError on a refusal or a failure. */
export async function runUpgrade(opts: UpgradeOptions): Promise<UpgradeOutcome> {
  const target = await openTarget(opts.device, opts.runDir, opts.dryRun);
  try {
    const facts = await readFacts(target, opts);
    const previous = await readJournal(target.stateDir);
    const resuming = previous?.status === 'running' || previous?.status === 'failed' ? previous.key === upgradeKey(target.stateDevice, opts) : false;
    const plan = planUpgrade(opts.source, facts);
    // A resumed upgrade may find its own half-done switch (no active.img yet): that is not a refusal.
    if (resuming && previous!.done.includes('build')) plan.refusals = plan.refusals.filter((r) => !r.includes('no cOS/active.img'));
    opts.log.info('upgrade plan', { plan: formatUpgradePlan(plan) });
    if (opts.dryRun) return { plan };
    if (plan.refusals.length > 0) {
      throw new HvError(`upgrade refused: ${plan.refusals.join('; ')}`, { where: `COS_STATE ${target.stateDevice}`, hint: 'nothing was changed', exitCode: ExitCode.checkFailed });
    }
    const journal = journalFor(previous, upgradeKey(target.stateDevice, opts), opts.source);
    await runSteps(target, plan, journal, opts);
    return { plan, journal };
  } finally {
    await target.release();
  }
}

/** The image now active: its digest from state.yaml, its name from the last upgrade's record when it is that image. */
async function currentImage(t: UpgradeTarget): Promise<{ name: string; digest: string }> {
  const yaml = await readFile(path.join(t.stateDir, 'state.yaml'), 'utf8').catch(() => '');
  const digest = activeDigestOf(yaml);
  const record = await readFile(path.join(t.oemDir, path.relative('/oem', UPGRADE_RECORD_PATH)), 'utf8').then((x) => JSON.parse(x) as UpgradeRecord).catch(() => undefined);
  if (record?.to.digest === digest && digest) return { digest, name: record.to.name };
  // After a committed fallback the running image is the last upgrade's `from` (relabelled, so its digest changed).
  if (record && record.from.digest && activeSourceOf(yaml) && activeSourceOf(yaml) !== record.to.source) return { digest, name: `${record.from.name}` };
  return { digest, name: activeSourceOf(yaml) ? `the image from ${activeSourceOf(yaml)}` : 'the image installed before this upgrade' };
}

async function buildStep(target: UpgradeTarget, journal: UpgradeJournal, opts: UpgradeOptions, sources: UpgradeSource[]): Promise<void> {
  const src = await openUpgradeSource(opts.source, { workDir: opts.runDir, sha256: opts.sha256, caFile: opts.caFile, log: opts.log });
  sources.push(src);
  opts.log.info('building the new image', { from: src.describe, to: `COS_STATE/${TRANSITION_IMAGE_FILE}` });
  let lastLog = 0;
  const built = await buildImageFile({
    root: target.stateDir,
    file: TRANSITION_IMAGE_FILE,
    label: 'COS_ACTIVE',
    source: src.source,
    systemSizeMiB: opts.systemSizeMiB,
    workDir: opts.runDir,
    signal: opts.signal,
    onProgress: (done, total) => {
      if (Date.now() - lastLog < 5000 && done < total) return;
      lastLog = Date.now();
      opts.log.info('build', { doneMiB: Math.round(done / 1048576), totalMiB: Math.round(total / 1048576) });
    },
  });
  journal.built = { record: built.record, sourceDigest: built.sourceDigest, name: imageName(built.osRelease), uri: src.uri };
  opts.log.info(built.kept ? 'the new image from an earlier run is intact: kept' : 'new image built', { name: journal.built.name, digest: built.record.digest });
}

async function runSteps(target: UpgradeTarget, plan: UpgradePlan, journal: UpgradeJournal, opts: UpgradeOptions): Promise<void> {
  const file = path.join(target.stateDir, UPGRADE_JOURNAL_FILE);
  const save = (): Promise<void> => writeFileAtomic(file, JSON.stringify({ ...journal, updatedAt: new Date().toISOString() }, null, 2) + '\n');
  journal.from ??= await currentImage(target);
  await save();
  const step = async (name: StepName, fn: () => Promise<void>): Promise<void> => {
    if (journal.done.includes(name)) return opts.log.info(`${name}: kept (an earlier run finished it)`);
    opts.log.info(`${name}: started`);
    await fn();
    journal.done.push(name);
    await save();
    opts.log.info(`${name}: done`);
  };
  const sources: UpgradeSource[] = [];
  try {
    await step('build', () => buildStep(target, journal, opts, sources));
    const built = journal.built!;
    await step('switch', async () => {
      const r = await switchImages({ stateDir: target.stateDir, image: built.record, source: built.uri, sourceDigest: built.sourceDigest, recovery: target.recovery }, opts.signal);
      for (const a of r.actions) opts.log.info('switch', { did: a });
    });
    await step('arm', async () => {
      for (const a of await armAssessment(target.stateDir, plan)) opts.log.info('arm', { did: a });
      const record: UpgradeRecord = { version: 1, at: new Date().toISOString(), from: journal.from!, to: { name: built.name, digest: built.record.digest, source: built.uri, sourceDigest: built.sourceDigest }, armed: plan.arm };
      await writeUpgradeRecord(target.oemDir, record);
    });
    journal.status = 'succeeded';
    await save();
  } catch (err) {
    journal.status = 'failed';
    journal.error = (err as Error).message;
    await save().catch(() => undefined);
    throw err;
  } finally {
    for (const s of sources) await s.release().catch(() => undefined);
  }
}
