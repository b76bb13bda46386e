/**
 * The journaled install pipeline: guard, then the steps in order, each journaled before and after.
 * A re-run of the same plan (same digest) resumes: steps an earlier run completed are kept when
 * their result still checks out, and everything from the first step that is not is done again.
 * On failure: unmount, invalidate the target so it cannot boot half-installed (unless
 * preserveOnError), keep the journal and the log on the host and, when possible, on COS_OEM.
 */
import { mkdirSync } from 'node:fs';
import { rm } from 'node:fs/promises';
import path from 'node:path';
import { HvError, ExitCode, describeError } from '../../lib/errors.js';
import { run } from '../../lib/exec.js';
import { Logger } from '../../lib/logger.js';
import { partitionPath } from '../disk/commands.js';
import { filesystemMismatch, exists } from '../disk/block.js';
import { findDisk, targetInUseProblems } from '../disk/plan.js';
import type { InstallPlan, StepName } from '../disk/types.js';
import type { MachineFacts } from '../preflight/types.js';
import { agentStep } from './agent-step.js';
import type { InstallContext, Step } from './context.js';
import { clearStep, formatStep, partitionStep, verifyStep } from './disk-steps.js';
import { bootloaderStep, deployStep, makeFinishStep, oemStep, persistentStep, saveInstallRecord } from './content-steps.js';
import { chrootStep } from './chroot-step.js';
import { newJournal, readJournal, JournalWriter, type Journal } from './journal.js';
import { lockDevice, type DeviceLock } from './lock.js';
import { mountsUnder, releaseStaleMounts } from './mounts.js';
import { busyHolders } from './holders.js';
import { sendWebhooks } from '../remote/webhooks.js';
import { killIfAsked } from './test-faults.js';
import { gatherFacts } from './prepare.js';
import { InstallLog } from './install-log.js';
import type { RunInstallOptions } from './run-options.js';

export type { RunInstallOptions } from './run-options.js';

export interface InstallOutcome {
  ok: boolean;
  resumed: boolean;
  journalFile: string;
  logFile: string;
  journal?: Journal;
  error?: unknown;
  failedStep?: StepName;
}

export function journalPaths(stateDir: string, device: string): { journalFile: string; logFile: string } {
  const name = path.basename(device);
  return { journalFile: path.join(stateDir, `${name}.journal.json`), logFile: path.join(stateDir, `${name}.install.log`) };
}

/** The steps after the guard, in order. */
export function pipelineSteps(finish: Step): Step[] {
  return [clearStep, partitionStep, formatStep, verifyStep, deployStep, bootloaderStep, oemStep, persistentStep, agentStep, chrootStep, finish];
}

export async function runInstall(opts: RunInstallOptions): Promise<InstallOutcome> {
  const { plan } = opts;
  const runDir = opts.runDir ?? path.join('/run/hvinstall', path.basename(plan.device));
  const currentFacts = opts.gatherFacts ?? (() => gatherFacts());
  mkdirSync(opts.stateDir, { recursive: true, mode: 0o700 });
  mkdirSync(runDir, { recursive: true, mode: 0o700 });
  const { journalFile, logFile } = journalPaths(opts.stateDir, plan.device);
  const installLog = new InstallLog();
  const log = new Logger({ write: (l) => installLog.write(l) }, opts.redactor, 'debug', { device: plan.device });
  const bus = opts.bus;
  bus.addSink({ event: (e) => log.info(e.type, e as unknown as Record<string, unknown>) });
  const sendWebhook = async (event: 'STARTED' | 'SUCCEEDED' | 'FAILED'): Promise<void> => {
    if (opts.webhooks === false || !opts.config.install?.webhooks?.length) return;
    await sendWebhooks(event, opts.config, { log }).catch((err) => log.warn('webhook failed', { event, error: String(err) }));
  };

  const steps = pipelineSteps(
    makeFinishStep(async () => {
      const j = writer!.journal;
      const final = { ...j, status: 'succeeded', steps: j.steps.map((s) => (s.name === 'finish' ? { ...s, status: 'done' } : s)) };
      return { log: installLog.text(), journal: JSON.stringify(final, null, 2) + '\n' };
    }),
  );
  const total = steps.length + 1;
  let writer: JournalWriter | undefined;
  let lock: DeviceLock | undefined;
  let resumed = false;
  let current: StepName = 'guard';
  const ctx: InstallContext = {
    plan,
    config: opts.config,
    source: opts.source,
    bundle: opts.bundle,
    agent: opts.agent,
    runDir,
    bus,
    log,
    redactor: opts.redactor,
    signal: opts.signal,
    facts: currentFacts,
    nodeFacts: opts.nodeFacts,
    killPoint: opts.killPoint,
  };

  await sendWebhook('STARTED');
  try {
    // --- guard: lock, clean up after a killed run, refuse a busy disk, open or resume the journal
    bus.emit({ type: 'step', phase: 'started', step: 'guard', index: 1, total });
    lock = await lockDevice(plan.device);
    const stale = await releaseStaleMounts(runDir);
    if (stale.length) log.warn('released mounts left by an earlier run', { stale });
    const facts = await currentFacts();
    await guardProblems(plan, facts, runDir);
    const previous = await readJournal(journalFile);
    resumed = !!previous && previous.planDigest === plan.digest && previous.device === plan.device && previous.status !== 'succeeded';
    const journal = resumed ? { ...previous!, status: 'running' as const, runs: previous!.runs + 1, error: undefined, invalidation: undefined } : newJournal(plan.digest, plan.device, ['guard', ...steps.map((s) => s.name)]);
    installLog.open(logFile, !resumed);
    writer = new JournalWriter(journalFile, journal);
    const guard = writer.step('guard');
    Object.assign(guard, { status: 'done', attempts: guard.attempts + 1, startedAt: new Date().toISOString(), endedAt: new Date().toISOString() });
    await writer.save();
    installLog.throwIfFailed(); // before the first step touches the disk
    bus.emit({ type: 'install', phase: resumed ? 'resumed' : 'started', device: plan.device, message: resumed ? `run ${journal.runs} of install ${journal.installId}` : `install ${journal.installId}, journal ${journalFile}` });
    bus.emit({ type: 'step', phase: 'done', step: 'guard', index: 1, total });
    killIfAsked('after:guard', opts.killPoint);

    // --- resume point: the first step not done, or done but no longer holding
    let redoFrom = steps.length;
    for (let i = 0; i < steps.length; i++) {
      const js = writer.step(steps[i]!.name);
      if (js.status !== 'done') {
        redoFrom = i;
        break;
      }
      const why = steps[i]!.check ? await steps[i]!.check!(ctx, js.detail) : undefined;
      if (why) {
        log.warn('a step done earlier no longer holds; redoing from it', { step: js.name, why });
        bus.emit({ type: 'message', level: 'warn', step: js.name, message: `done in an earlier run but ${why}: redoing from here` });
        redoFrom = i;
        break;
      }
    }

    for (let i = 0; i < steps.length; i++) {
      const step = steps[i]!;
      current = step.name;
      const js = writer.step(step.name);
      if (i < redoFrom) {
        bus.emit({ type: 'step', phase: 'skipped', step: step.name, index: i + 2, total, message: 'done in an earlier run' });
        continue;
      }
      Object.assign(js, { status: 'running', attempts: js.attempts + 1, startedAt: new Date().toISOString(), endedAt: undefined, durationMs: undefined, error: undefined, detail: undefined });
      await writer.save();
      bus.emit({ type: 'step', phase: 'started', step: step.name, index: i + 2, total });
      killIfAsked(`before:${step.name}`, opts.killPoint);
      const t0 = Date.now();
      const detail = await step.run(ctx);
      opts.signal?.throwIfAborted();
      installLog.throwIfFailed();
      Object.assign(js, { status: 'done', endedAt: new Date().toISOString(), durationMs: Date.now() - t0, ...(detail ? { detail } : {}) });
      await writer.save();
      bus.emit({ type: 'step', phase: 'done', step: step.name, index: i + 2, total, message: `${((Date.now() - t0) / 1000).toFixed(1)} s` });
      killIfAsked(`after:${step.name}`, opts.killPoint);
    }
    writer.journal.status = 'succeeded';
    await writer.save();
    bus.emit({ type: 'install', phase: 'succeeded', device: plan.device });
    await lock.release();
    lock = undefined;
    // The run directory only held mount points and scratch; never remove it with anything mounted.
    if ((await mountsUnder(runDir)).length === 0) await rm(runDir, { recursive: true, force: true }).catch(() => undefined);
    await sendWebhook('SUCCEEDED');
    return { ok: true, resumed, journalFile, logFile, journal: writer.journal };
  } catch (err) {
    const message = opts.redactor.redactString(err instanceof Error ? err.message : String(err));
    log.error('install failed', { step: current, error: message });
    bus.emit({ type: 'step', phase: 'failed', step: current, index: steps.findIndex((s) => s.name === current) + 2, total, message });
    if (writer) {
      const js = writer.journal.steps.find((s) => s.name === current);
      if (js) Object.assign(js, { status: 'failed', endedAt: new Date().toISOString(), error: message });
      writer.journal.status = 'failed';
      writer.journal.error = { step: current, message, ...(err instanceof HvError && err.hint ? { hint: err.hint } : {}) };
      await writer.save().catch(() => undefined);
      await releaseStaleMounts(runDir).catch(() => undefined);
      // Only a disk we started to change is invalidated; a refused guard touched nothing.
      const touched = writer.step('clear').attempts > 0;
      if (touched && !opts.preserveOnError) {
        const wiped = await invalidateTarget(plan).catch((e) => [`invalidation failed: ${describeError(e)}`]);
        writer.journal.status = 'invalidated';
        writer.journal.invalidation = wiped;
        log.warn('target invalidated so it cannot boot half-installed', { wiped });
        bus.emit({ type: 'message', level: 'warn', message: `${plan.device} invalidated so it cannot boot half-installed (${wiped.join(', ') || 'nothing bootable was written yet'})` });
      } else if (touched) {
        bus.emit({ type: 'message', level: 'warn', message: `--preserve-on-error: ${plan.device} left as it is, for inspection; it may not boot` });
      }
      await writer.save().catch(() => undefined);
      await copyRecordToOem(plan, runDir, installLog.text(), JSON.stringify(writer.journal, null, 2) + '\n').catch(() => undefined);
    }
    bus.emit({ type: 'install', phase: 'failed', device: plan.device, message: `journal ${journalFile}, log ${logFile}` });
    await lock?.release().catch(() => undefined);
    if ((await mountsUnder(runDir).catch(() => ['?'])).length === 0) await rm(runDir, { recursive: true, force: true }).catch(() => undefined);
    await sendWebhook('FAILED');
    return { ok: false, resumed, journalFile, logFile, journal: writer?.journal, error: err, failedStep: current };
  }
}

async function guardProblems(plan: InstallPlan, facts: MachineFacts, runDir: string): Promise<void> {
  const problems: string[] = [];
  const target = findDisk(facts, plan.device);
  if (!target) {
    problems.push(`${plan.device} is gone`);
  } else {
    if (target.sizeBytes !== plan.deviceSizeBytes || target.logicalSectorSize !== plan.logicalSectorSize) {
      problems.push(`${plan.device} changed since it was planned (${target.sizeBytes} bytes, ${target.logicalSectorSize}-byte sectors; planned ${plan.deviceSizeBytes}, ${plan.logicalSectorSize})`);
    }
    problems.push(...targetInUseProblems(target, { ownMountPrefix: `${runDir}/`, busyHolders: await busyHolders(target.inUse.holders) }));
  }
  for (const other of [plan.dataDisk?.path, ...plan.wipeDisks]) {
    if (!other) continue;
    const d = findDisk(facts, other);
    if (d) problems.push(...targetInUseProblems(d, { ownMountPrefix: `${runDir}/`, busyHolders: await busyHolders(d.inUse.holders) }));
  }
  if (problems.length) {
    throw new HvError(problems.length === 1 ? `refusing to install: ${problems[0]}` : `refusing to install:\n${problems.map((p) => `  - ${p}`).join('\n')}`, {
      where: plan.device,
      hint: 'nothing was changed on any disk',
      exitCode: ExitCode.checkFailed,
    });
  }
}

/**
 * Makes a half-installed disk unbootable: wipes the signatures of the filesystems grub and the
 * initramfs look for (COS_GRUB, COS_STATE, COS_RECOVERY). COS_OEM keeps the journal and log.
 */
export async function invalidateTarget(plan: InstallPlan): Promise<string[]> {
  const wiped: string[] = [];
  for (const p of plan.partitions) {
    if (!['efi', 'state', 'recovery'].includes(p.role)) continue;
    const dev = partitionPath(plan.device, p.number);
    if (!(await exists(dev))) continue;
    await run('wipefs', ['--all', '--force', dev], { timeoutMs: 120_000 });
    wiped.push(`${dev} (${p.label})`);
  }
  await run('sync', [], { allowFailure: true });
  return wiped;
}

/** After a failure, the record goes to COS_OEM too when that filesystem is ours and intact. */
async function copyRecordToOem(plan: InstallPlan, runDir: string, log: string, journal: string): Promise<void> {
  const oem = plan.partitions.find((p) => p.role === 'oem');
  if (!oem) return;
  const dev = partitionPath(plan.device, oem.number);
  if (!(await exists(dev)) || (await filesystemMismatch(oem, dev))) return;
  await saveInstallRecord(plan, runDir, log, journal);
}
