/**
 * The journaled install pipeline: guard, then the steps in order, each journaled before and after.
 * A re-run of the same plan (same digest) resumes: steps an earlier run completed are kept when
 * their result still checks out (by content: the deployed images are read back), and everything
 * from the first step that is not is done again.
 * On failure: stop every command this run started (with its process group), unmount, invalidate
 * the target so it cannot boot half-installed (unless preserveOnError; what could not be
 * invalidated is named), keep the journal and the log on the host and, when possible, on COS_OEM.
 */
import { rm } from 'node:fs/promises';
import path from 'node:path';
import { HvError, ExitCode } from '../../lib/errors.js';
import { recordChildrenIn, runningCommands, stopLiveChildren, stopRecordedGroups, waitForLiveChildren } from '../../lib/exec.js';
import { Logger } from '../../lib/logger.js';
import { partitionPath } from '../disk/commands.js';
import { filesystemMismatch, exists } from '../disk/block.js';
import { describeInvalidation, invalidateDisk } from '../disk/invalidate.js';
import { firstKernelIoError, kernelClock, kernelIoNote } from '../disk/kernel-errors.js';
import type { InstallPlan, StepName } from '../disk/types.js';
import { beforeTargetStalls, SOURCE_STALL_TIMEOUT_MS, takeSourceDigests, TargetWatch, type SourceDigests } from '../deploy/index.js';
import { agentStep } from './agent-step.js';
import type { InstallContext, Step } from './context.js';
import { clearStep, formatStep, installDisks, partitionStep, verifyStep } from './disk-steps.js';
import { bootloaderStep, deployStep, makeFinishStep, oemStep, persistentStep, saveInstallRecord } from './content-steps.js';
import { chrootStep } from './chroot-step.js';
import { newJournal, readJournal, type Journal } from './journal.js';
import { lockDevice, type DeviceLock } from './lock.js';
import { mountsUnder, releaseStaleMounts } from './mounts.js';
import { sendWebhooks } from '../remote/webhooks.js';
import { killIfAsked, testStallTimeoutMs } from './test-faults.js';
import { gatherFacts } from './prepare.js';
import { InstallLog } from './install-log.js';
import { checkStateDir, HostRecord } from './host-record.js';
import { guardProblems, heldPartitions } from './guard.js';
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
  /** Why the host's journal or log is missing or behind (the disk's own record is then the one to read). */
  hostRecordProblem?: string;
}

export function journalPaths(stateDir: string, device: string): { journalFile: string; logFile: string } {
  const name = path.basename(device);
  return { journalFile: path.join(stateDir, `${name}.journal.json`), logFile: path.join(stateDir, `${name}.install.log`) };
}

/** The steps after the guard, in order. */
export function pipelineSteps(finish: Step): Step[] {
  return [clearStep, partitionStep, formatStep, verifyStep, deployStep, bootloaderStep, oemStep, persistentStep, agentStep, chrootStep, finish];
}

/** One run of the pipeline, as its phases pass it on. */
interface PipelineRun {
  opts: RunInstallOptions;
  plan: InstallPlan;
  runDir: string;
  journalFile: string;
  logFile: string;
  installLog: InstallLog;
  log: Logger;
  steps: Step[];
  total: number;
  ctx: InstallContext;
  record?: HostRecord;
  lock?: DeviceLock;
  resumed: boolean;
  current: StepName;
  /** The kernel's clock when the run began: its I/O errors from then on are this run's. */
  since: number;
  /** When the last progress event went out (the heartbeat fills silences). */
  lastEventAt: number;
}

/** A step that has said nothing for this long says that it is still at work, and on what. */
export const HEARTBEAT_MS = 5_000;

export async function runInstall(opts: RunInstallOptions): Promise<InstallOutcome> {
  const r = openRun(opts);
  const unwritable = await checkStateDir(opts.stateDir);
  if (unwritable) return refusedUpFront(r, unwritable);
  await sendWebhook(r, 'STARTED');
  try {
    await guard(r);
    await runSteps(r, await resumePoint(r));
    return await succeeded(r);
  } catch (err) {
    return await failed(r, err);
  }
}

function openRun(opts: RunInstallOptions): PipelineRun {
  const { plan } = opts;
  const runDir = opts.runDir ?? path.join('/run/hvinstall', path.basename(plan.device));
  const { journalFile, logFile } = journalPaths(opts.stateDir, plan.device);
  const installLog = new InstallLog();
  const log = new Logger({ write: (l) => installLog.write(l) }, opts.redactor, 'debug', { device: plan.device });
  opts.bus.addSink({ event: (e) => log.info(e.type, e as unknown as Record<string, unknown>) });
  const r: PipelineRun = { opts, plan, runDir, journalFile, logFile, installLog, log, steps: [], total: 0, resumed: false, current: 'guard', since: 0, lastEventAt: Date.now(), ctx: undefined as unknown as InstallContext };
  opts.bus.addSink({ event: () => (r.lastEventAt = Date.now()) });
  r.steps = pipelineSteps(makeFinishStep(async () => ({ log: installLog.text(), journal: JSON.stringify(r.record!.final(), null, 2) + '\n', nodeReport: opts.nodeReport })));
  r.total = r.steps.length + 1;
  r.ctx = {
    plan,
    config: opts.config,
    source: opts.source,
    bundle: opts.bundle,
    agent: opts.agent,
    runDir,
    bus: opts.bus,
    log,
    redactor: opts.redactor,
    signal: opts.signal,
    facts: opts.gatherFacts ?? (() => gatherFacts()),
    nodeFacts: opts.nodeFacts,
    killPoint: opts.killPoint,
    recorded: (step) => r.record?.journal.steps.find((s) => s.name === step)?.detail,
  };
  return r;
}

async function sendWebhook(r: PipelineRun, event: 'STARTED' | 'SUCCEEDED' | 'FAILED'): Promise<void> {
  if (r.opts.webhooks === false || !r.opts.config.install?.webhooks?.length) return;
  await sendWebhooks(event, r.opts.config, { log: r.log }).catch((err) => r.log.warn('webhook failed', { event, error: String(err) }));
}

/** The state dir cannot hold the journal and log: refused before anything, naming why. */
async function refusedUpFront(r: PipelineRun, problem: HvError): Promise<InstallOutcome> {
  r.opts.bus.emit({ type: 'step', phase: 'failed', step: 'guard', index: 1, total: r.total, message: problem.message });
  r.opts.bus.emit({ type: 'install', phase: 'failed', device: r.plan.device, message: `nothing was changed on any disk; ${problem.message}` });
  return { ok: false, resumed: false, journalFile: r.journalFile, logFile: r.logFile, error: problem, failedStep: 'guard', hostRecordProblem: `not written: ${problem.message}` };
}

/**
 * Lock, stop what a killed earlier run left running and release its mounts, refuse a busy disk,
 * digest the source, open or resume the journal. Nothing here writes to a disk.
 */
async function guard(r: PipelineRun): Promise<void> {
  const { plan, opts, runDir, log } = r;
  opts.bus.emit({ type: 'step', phase: 'started', step: 'guard', index: 1, total: r.total });
  r.since = await kernelClock();
  r.lock = await lockDevice(plan.device);
  const left = await stopRecordedGroups(path.join(runDir, 'children'));
  if (left.stopped.length) log.warn('stopped processes an earlier run left running', { stopped: left.stopped });
  if (left.stuck.length) throw guardRefusal(plan, `processes an earlier run left do not end: ${left.stuck.join('; ')}`);
  recordChildrenIn(path.join(runDir, 'children'));
  const stale = await releaseStaleMounts(runDir);
  if (stale.length) log.warn('released mounts left by an earlier run', { stale });
  await guardProblems(plan, await r.ctx.facts(), runDir);
  const held = await heldPartitions(plan);
  if (held.length) throw guardRefusal(plan, `${held.join(', ')} still held (a filesystem an earlier run mounted, unmounted lazily but in use, or a process): stop what holds it and run the install again`);
  r.ctx.sourceDigests = await digestSource(r);
  const previous = await readJournal(r.journalFile);
  r.resumed = !!previous && previous.planDigest === plan.digest && previous.device === plan.device && previous.status !== 'succeeded';
  const journal = r.resumed ? { ...previous!, status: 'running' as const, runs: previous!.runs + 1, error: undefined, invalidation: undefined, notInvalidated: undefined } : newJournal(plan.digest, plan.device, ['guard', ...r.steps.map((s) => s.name)]);
  r.installLog.open(r.logFile, !r.resumed);
  r.record = new HostRecord(r.journalFile, journal, r.installLog, opts.bus, log);
  const g = r.record.step('guard');
  Object.assign(g, { status: 'done', attempts: g.attempts + 1, startedAt: new Date().toISOString(), endedAt: new Date().toISOString(), detail: { sourceContentDigest: r.ctx.sourceDigests.digest } });
  await r.record.saveOrThrow(); // before the first step touches the disk, the host's record must work
  opts.bus.emit({ type: 'install', phase: r.resumed ? 'resumed' : 'started', device: plan.device, message: r.resumed ? `run ${journal.runs} of install ${journal.installId}` : `install ${journal.installId}, journal ${r.journalFile}` });
  opts.bus.emit({ type: 'step', phase: 'done', step: 'guard', index: 1, total: r.total });
  killIfAsked('after:guard', opts.killPoint);
}

/** The source's content digests, with a progress line every HEARTBEAT_MS (a slow boot medium takes minutes). */
async function digestSource(r: PipelineRun): Promise<SourceDigests> {
  const { bus, source, signal } = r.opts;
  let bytes = 0;
  const say = (): void => bus.emit({ type: 'message', level: 'info', step: 'guard', message: `digesting the OS source ${source.path}: ${Math.round(bytes / 1048576)} MiB read` });
  say();
  const tick = setInterval(say, HEARTBEAT_MS);
  try {
    return await takeSourceDigests(source, path.join(r.runDir, 'work'), { signal, onBytes: (n) => (bytes += n) });
  } finally {
    clearInterval(tick);
  }
}

function guardRefusal(plan: InstallPlan, problem: string): HvError {
  return new HvError(`refusing to install: ${problem}`, { where: plan.device, hint: 'nothing was changed on any disk', exitCode: ExitCode.checkFailed });
}

/** The first step not done, or done but no longer holding. */
async function resumePoint(r: PipelineRun): Promise<number> {
  for (let i = 0; i < r.steps.length; i++) {
    const js = r.record!.step(r.steps[i]!.name);
    if (js.status !== 'done') return i;
    const why = r.steps[i]!.check ? await r.steps[i]!.check!(r.ctx, js.detail) : undefined;
    if (why) {
      r.log.warn('a step done earlier no longer holds; redoing from it', { step: js.name, why });
      r.opts.bus.emit({ type: 'message', level: 'warn', step: js.name, message: `done in an earlier run but ${why}: redoing from here` });
      return i;
    }
  }
  return r.steps.length;
}

async function runSteps(r: PipelineRun, redoFrom: number): Promise<void> {
  const { opts, record } = r;
  for (const [i, step] of r.steps.entries()) {
    r.current = step.name;
    const js = record!.step(step.name);
    if (i < redoFrom) {
      opts.bus.emit({ type: 'step', phase: 'skipped', step: step.name, index: i + 2, total: r.total, message: 'done in an earlier run' });
      continue;
    }
    Object.assign(js, { status: 'running', attempts: js.attempts + 1, startedAt: new Date().toISOString(), endedAt: undefined, durationMs: undefined, error: undefined, detail: undefined });
    await record!.save();
    opts.bus.emit({ type: 'step', phase: 'started', step: step.name, index: i + 2, total: r.total });
    killIfAsked(`before:${step.name}`, opts.killPoint);
    const t0 = Date.now();
    const detail = await withHeartbeat(r, step.name, step.run(r.ctx));
    opts.signal?.throwIfAborted();
    Object.assign(js, { status: 'done', endedAt: new Date().toISOString(), durationMs: Date.now() - t0, ...(detail ? { detail } : {}) });
    await record!.save();
    opts.bus.emit({ type: 'step', phase: 'done', step: step.name, index: i + 2, total: r.total, message: `${((Date.now() - t0) / 1000).toFixed(1)} s` });
    killIfAsked(`after:${step.name}`, opts.killPoint);
  }
}

/**
 * Every step can take minutes on a slow disk: one that has been silent for HEARTBEAT_MS says so.
 * And a target disk that stops answering (requests in flight, none completed for the stall
 * timeout) fails the step naming it, whatever the step was waiting on (a mount, a tool, a write).
 */
async function withHeartbeat<T>(r: PipelineRun, step: StepName, work: Promise<T>): Promise<T> {
  const t0 = Date.now();
  const watch = new TargetWatch(installDisks(r.plan), testStallTimeoutMs() ?? SOURCE_STALL_TIMEOUT_MS);
  const timer = setInterval(() => {
    if (Date.now() - r.lastEventAt < HEARTBEAT_MS) return;
    const on = runningCommands();
    r.opts.bus.emit({ type: 'message', level: 'info', step, message: `${step}: still working after ${Math.round((Date.now() - t0) / 1000)} s${on.length ? `, waiting on ${r.opts.redactor.redactString(on[on.length - 1]!)}` : ''}` });
  }, 1_000);
  try {
    return await beforeTargetStalls(watch, `the ${step} step`, work);
  } finally {
    clearInterval(timer);
    watch.stop();
  }
}

async function succeeded(r: PipelineRun): Promise<InstallOutcome> {
  const record = r.record!;
  record.journal.status = 'succeeded';
  await record.save();
  r.opts.bus.emit({ type: 'install', phase: 'succeeded', device: r.plan.device });
  await endRun(r);
  await sendWebhook(r, 'SUCCEEDED');
  return { ok: true, resumed: r.resumed, journalFile: r.journalFile, logFile: r.logFile, journal: record.journal, hostRecordProblem: record.problem };
}

/** Releases the lock and the run directory (only ever with nothing mounted in it). */
async function endRun(r: PipelineRun): Promise<void> {
  recordChildrenIn(undefined);
  await r.lock?.release().catch(() => undefined);
  r.lock = undefined;
  if ((await mountsUnder(r.runDir).catch(() => ['?'])).length === 0) await rm(r.runDir, { recursive: true, force: true }).catch(() => undefined);
}

async function failed(r: PipelineRun, err: unknown): Promise<InstallOutcome> {
  const { opts, plan, record } = r;
  // Nothing this run started may outlive the verdict, or write to the disk while it is invalidated.
  const stuck = await stopLiveChildren();
  const message = opts.redactor.redactString(`${err instanceof Error ? err.message : String(err)}${await kernelNote(r, err)}${stuck.length ? `\nstill running: ${stuck.join('; ')}` : ''}`);
  const error = err instanceof HvError ? Object.assign(err, { message }) : new HvError(message, { exitCode: ExitCode.installFailed, cause: err });
  r.log.error('install failed', { step: r.current, error: message });
  opts.bus.emit({ type: 'step', phase: 'failed', step: r.current, index: r.steps.findIndex((s) => s.name === r.current) + 2, total: r.total, message });
  if (record) {
    const js = record.journal.steps.find((s) => s.name === r.current);
    if (js) Object.assign(js, { status: 'failed', endedAt: new Date().toISOString(), error: message });
    record.journal.status = 'failed';
    record.journal.error = { step: r.current, message, ...(error.hint ? { hint: error.hint } : {}) };
    await record.save();
    if (stuck.length) await waitOutStuckCommands(r);
    await releaseStaleMounts(r.runDir).catch(() => undefined);
    await invalidateIfTouched(r);
    await record.save();
    await copyRecordToOem(plan, r.runDir, r.installLog.text(), JSON.stringify(record.journal, null, 2) + '\n').catch(() => undefined);
  }
  opts.bus.emit({ type: 'install', phase: 'failed', device: plan.device, message: `journal ${r.journalFile}, log ${r.logFile}` });
  await endRun(r);
  await sendWebhook(r, 'FAILED');
  return { ok: false, resumed: r.resumed, journalFile: r.journalFile, logFile: r.logFile, journal: record?.journal, error, failedStep: r.current, hostRecordProblem: record ? record.problem : 'not written: the guard stopped before the journal was opened' };
}

/**
 * How long a failed run waits for its commands stuck in the kernel before it cleans up. Such a
 * command acts when its disk answers again: a `mount` stuck on the superblock write would mount
 * COS_STATE after the cleanup unmounted everything, over the disk just invalidated (and its
 * write-back could put back what the invalidation zeroed). A disk that comes back (a path
 * failover, a controller reset) has this long; one that does not, gets the cleanup anyway.
 */
const STUCK_WAIT_MS = 30_000;

async function waitOutStuckCommands(r: PipelineRun): Promise<void> {
  const { bus } = r.opts;
  bus.emit({ type: 'message', level: 'warn', message: `waiting up to ${STUCK_WAIT_MS / 1000} s for the commands stuck in the kernel to end before the cleanup (they act if the disk answers again)` });
  const still = await waitForLiveChildren(STUCK_WAIT_MS);
  if (!still.length) return;
  const text = `still stuck after ${STUCK_WAIT_MS / 1000} s, cleaning up without them: ${still.join('; ')}. If the disk answers later they may still act (a mount under ${r.runDir}); the next run of the install releases it`;
  r.log.warn('commands stuck in the kernel', { still });
  bus.emit({ type: 'message', level: 'error', message: r.opts.redactor.redactString(text) });
}

/** The kernel's first I/O error on the install's disks during this run, unless the error already says it. */
async function kernelNote(r: PipelineRun, err: unknown): Promise<string> {
  if (!r.since) return '';
  const disks = installDisks(r.plan);
  const since = r.since - 1;
  const read = await firstKernelIoError(disks, since).catch(() => undefined);
  // Which stretch of the kernel log the error's note comes from: what the disk does later (the
  // invalidation's writes) is not in it.
  r.log.info('kernel log read for I/O errors', { disks, since, readTo: read?.readTo ?? null, found: read?.report?.error?.line ?? null, suppressed: read?.report?.suppressed ?? [], readable: read !== undefined });
  return kernelIoNote(read?.report, disks, String((err as Error)?.message));
}

/** Only a disk this run started to change is invalidated; a refused guard touched nothing. */
async function invalidateIfTouched(r: PipelineRun): Promise<void> {
  const { opts, plan, record } = r;
  if (record!.step('clear').attempts === 0) return;
  if (opts.preserveOnError) {
    opts.bus.emit({ type: 'message', level: 'warn', message: `--preserve-on-error: ${plan.device} left as it is, for inspection; it may not boot` });
    return;
  }
  const results = await invalidateDisk(plan).catch((e: unknown) => [{ device: plan.device, what: 'disk', ok: false, problem: `could not invalidate ${plan.device}: ${String((e as Error)?.message ?? e)}; do not boot this disk` }]);
  const lines = describeInvalidation(results);
  record!.journal.invalidation = lines.filter((_l, i) => results[i]!.ok);
  record!.journal.notInvalidated = lines.filter((_l, i) => !results[i]!.ok);
  record!.journal.status = results.every((x) => x.ok) ? 'invalidated' : 'failed';
  const done = record!.journal.invalidation;
  r.log.warn('target invalidated so it cannot boot half-installed', { invalidated: done, notInvalidated: record!.journal.notInvalidated });
  if (done.length) opts.bus.emit({ type: 'message', level: 'warn', message: `${plan.device} invalidated so it cannot boot half-installed (${done.join(', ')})` });
  for (const l of record!.journal.notInvalidated) opts.bus.emit({ type: 'message', level: 'error', message: l });
}

/** After a failure, the record goes to COS_OEM too when that filesystem is ours and intact. */
async function copyRecordToOem(plan: InstallPlan, runDir: string, log: string, journal: string): Promise<void> {
  const oem = plan.partitions.find((p) => p.role === 'oem');
  if (!oem) return;
  const dev = partitionPath(plan.device, oem.number);
  if (!(await exists(dev)) || (await filesystemMismatch(oem, dev))) return;
  await saveInstallRecord(plan, runDir, log, journal);
}
