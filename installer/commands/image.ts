/**
 * `hvinstall image --config F --source S --out node.qcow2|node.raw [--size SIZE] [--force]`: a disk
 * image for virtual labs and clouds. The normal install pipeline runs onto a sparse file through a
 * loop device (always detached again), then `qemu-img convert` writes the image sparse in the
 * format --out's extension names. Naming a new --out is the consent; an existing one needs --force
 * and is replaced only when the new image is complete.
 */
import { access, open, rename, rm, stat } from 'node:fs/promises';
import path from 'node:path';
import { ExitCode, HvError } from '../../lib/errors.js';
import { run } from '../../lib/exec.js';
import { withResolvedDisks } from '../../config/disk-selector.js';
import { formatBytes } from '../../config/disk-sizes.js';
import { convertArgs, imageFormatOf, imageSizeBytes, oneDiskProblems, scratchPaths } from '../image/decide.js';
import { resolveBundleSource } from '../steps/bundle-source.js';
import { resolveAgentArg, type AgentSource } from '../steps/agent-source.js';
import { journalPaths, runInstall } from '../steps/pipeline.js';
import { installInputs, loadInstallConfig, prepareInstall } from '../steps/prepare.js';
import { EventBus, PROGRESS_MODES, progressModeOf, sinkFor, type ProgressMode } from '../steps/progress.js';
import { describeFailedInstall, failedInstallText } from '../steps/failed-install.js';
import { parseCommandArgs } from './args.js';
import { emitGate, readFactsFile } from './install-gate.js';
import { gateRefusal, judgeInstall, nodeFactsFor, type GateTarget, type GateVerdict } from '../preflight/index.js';
import { parseSystemSize } from './plan.js';
import type { OptionDefs } from '../../lib/cli/definition.js';

export const USAGE = `usage: hvinstall image --config FILE --source DIR|SQUASHFS --out NODE.qcow2|NODE.raw [--size SIZE] [--force]
                       [--facts FILE] [--legacy-bios] [--bundle DIR|none] [--agent DIR|none] [--system-size MIB] [--progress tty|plain|json] [--state-dir DIR]

Installs the node described by FILE into a new disk image, for virtual labs and clouds: the install
runs onto a sparse file through a loop device, then qemu-img converts it (sparse) to --out.
  --out F           the image to write; .qcow2 or .raw picks the format. Naming a new file is the consent;
                    an existing F is refused unless --force (it is replaced only once the new image is complete)
  --size SIZE       the virtual disk size, e.g. 260G (default and minimum: Harvester's install disk minimum,
                    250 GiB, 180 GiB for the witness role); the file is sparse
  --force           replace an existing --out
  --facts FILE      the facts of the machine the image is for ('hvinstall preflight --json' there, or
                    the VM's): checked against Harvester's requirements (install.skipchecks lets failures
                    through), and its NICs and CPU count go into the node's files. Without it the image
                    says no machine was checked: NIC names are not matched, kubelet's reserved CPU
                    assumes Harvester's minimum of 8 CPUs, and nothing of this build machine is used
  --legacy-bios     with --facts of a legacy-BIOS machine: build the image anyway (Harvester v1.8 refuses BIOS)
  --bundle DIR|none the container image bundle to copy to COS_PERSISTENT (default: none)
  --agent DIR|none  the self-contained hvagent payload to enable on the node (default: the installer's own)
  --system-size MIB active.img size (default: 3072, or the source plus headroom when larger)
  --progress MODE   tty, plain or json (default: tty on a terminal, plain otherwise)
  --state-dir DIR   where the journal and install log are kept (default /var/lib/hvinstall/image)
An image run never resumes: each run starts a fresh file. install.data_disk and wipe_disks_list are refused
(an image is one disk); install.device is replaced by the loop device.
Exit codes: 0 written, 1 refused (config invalid, layout does not fit), 2 usage, 3 the install or conversion failed.`;

/** What the parser accepts: --help, completion and the man page read the same object. */
export const OPTIONS = {
  config: { type: 'string' },
  source: { type: 'string' },
  out: { type: 'string' },
  size: { type: 'string' },
  force: { type: 'boolean' },
  bundle: { type: 'string' },
  agent: { type: 'string' },
  'system-size': { type: 'string' },
  progress: { type: 'string', choices: PROGRESS_MODES },
  'state-dir': { type: 'string' },
  facts: { type: 'string' },
  'legacy-bios': { type: 'boolean' },
} as const satisfies OptionDefs;

const CONVERT_TIMEOUT_MS = 2 * 60 * 60_000;

async function exists(p: string): Promise<boolean> {
  return access(p).then(
    () => true,
    () => false,
  );
}

export default async function image(argv: string[]): Promise<number> {
  const args = parseCommandArgs(argv, OPTIONS, USAGE);
  if (!args) return ExitCode.ok;
  const { values } = args;
  for (const k of ['config', 'source', 'out'] as const) if (!values[k]) throw new HvError(`--${k} is required`, { hint: USAGE, exitCode: ExitCode.usage });
  const out = path.resolve(values.out!);
  const format = imageFormatOf(out);
  const mode = progressModeOf(values.progress, process.stdout.isTTY === true);
  const dirStat = await stat(path.dirname(out)).catch(() => undefined);
  if (!dirStat?.isDirectory()) {
    throw new HvError(`--out ${values.out}: the directory ${path.dirname(out)} does not exist`, { hint: 'create it first, or name an image in an existing directory', exitCode: ExitCode.usage });
  }
  if ((await exists(out)) && !values.force) {
    throw new HvError(`--out ${values.out} exists; refusing to replace it`, { hint: 'name a new file, or add --force to replace it', exitCode: ExitCode.usage });
  }
  const systemSizeMiB = parseSystemSize(values['system-size']);
  const bundle = await resolveBundleSource(values.bundle ?? 'none');
  const agent = await resolveAgentArg(values.agent);
  const loaded = await loadInstallConfig(values.config!);
  const given = await readFactsFile(values.facts);
  const target: GateTarget = { kind: 'other-machine', why: 'hvinstall image builds a disk image', facts: given?.facts, factsFrom: given?.from, allowLegacyBios: values['legacy-bios'] === true };
  const verdict = judgeInstall(target, loaded.config);
  if (!verdict.gate.proceed) throw gateRefusal(verdict);
  const problems = oneDiskProblems(loaded.config);
  if (problems.length) throw new HvError(`the config does not fit a disk image:\n${problems.map((p) => `  - ${p}`).join('\n')}`, { where: values.config, exitCode: ExitCode.usage });
  const sizeBytes = imageSizeBytes(loaded.config, values.size);
  if (process.getuid?.() !== 0) throw new HvError('hvinstall image must run as root (it uses a loop device, partitions and mounts)', { exitCode: ExitCode.usage });
  await run('qemu-img', ['--version'], { timeoutMs: 30_000 }).catch((err: unknown) => {
    throw new HvError(`qemu-img is not usable: ${(err as Error).message}`, { hint: 'install qemu-utils', exitCode: ExitCode.usage });
  });

  const say = (s: string): void => void (mode === 'json' ? process.stderr : process.stdout).write(s);
  const { work, partial } = scratchPaths(out);
  await rm(work, { force: true });
  await rm(partial, { force: true });
  const file = await open(work, 'wx', 0o600);
  let loop: string | undefined;
  let installed = false;
  try {
    await file.truncate(sizeBytes);
    await file.close();
    loop = (await run('losetup', ['--find', '--show', '--partscan', work], { timeoutMs: 60_000 })).stdout.trim();
    say(`image: installing onto ${work} (${formatBytes(sizeBytes)}, sparse) through ${loop}\n`);
    const failed = await installOnto(loop, loaded, values, bundle, agent, mode, systemSizeMiB, { target, verdict });
    if (failed !== undefined) return failed;
    installed = true;
  } finally {
    await file.close().catch(() => undefined);
    if (loop) await detach(loop);
    // Nothing half-made stays beside --out.
    if (!installed) await rm(work, { force: true });
  }

  try {
    await run('qemu-img', convertArgs(work, partial, format), { timeoutMs: CONVERT_TIMEOUT_MS });
    await rename(partial, out);
  } catch (err) {
    throw new HvError(`converting the installed disk to ${format} failed: ${(err as Error).message}`, { where: out, hint: 'check free space next to --out and run the same command again', exitCode: ExitCode.installFailed, cause: err });
  } finally {
    await rm(partial, { force: true });
    await rm(work, { force: true });
  }
  const s = await stat(out);
  say(`image written: ${out} (${format}, virtual size ${formatBytes(sizeBytes)}, ${formatBytes(s.blocks * 512)} allocated)\n`);
  return ExitCode.ok;
}

/** Detaches the loop device; a failure to do so is reported, never hidden. */
async function detach(loop: string): Promise<void> {
  const r = await run('losetup', ['--detach', loop], { allowFailure: true, timeoutMs: 60_000 });
  if (r.exitCode !== 0) process.stderr.write(`hvinstall image: warning: losetup --detach ${loop} failed: ${r.stderr.trim()}; detach it by hand\n`);
}

/** The normal install onto the loop device; undefined when it succeeded, else the exit code (the work file is removed). */
async function installOnto(
  loop: string,
  loaded: Awaited<ReturnType<typeof loadInstallConfig>>,
  values: { config?: string; source?: string; 'state-dir'?: string },
  bundle: Awaited<ReturnType<typeof resolveBundleSource>>,
  agent: AgentSource,
  mode: ProgressMode,
  systemSizeMiB: number | undefined,
  gate: { target: GateTarget; verdict: GateVerdict },
): Promise<number | undefined> {
  // The image boots in a VM whose firmware this host does not tell: UEFI (Harvester v1.8 refuses
  // legacy BIOS), unless the config asks for an msdos table (a BIOS image).
  const uefi = loaded.config.install?.forceMbr ? {} : { forceEfi: true };
  // The image is the one disk: a device rule is for the machine that installs, not for this file.
  const config = withResolvedDisks({ ...loaded.config, install: { ...loaded.config.install, device: loop, ...uefi } }, { device: loop });
  const prepared = await prepareInstall({ configPath: values.config!, loaded: { config, warnings: loaded.warnings }, device: loop, source: values.source, requireSource: true, systemSizeMiB, agent, nodeFacts: nodeFactsFor(gate.target) });
  for (const w of prepared.warnings) process.stderr.write(`warning: ${w}\n`);
  const stateDir = values['state-dir'] ?? '/var/lib/hvinstall/image';
  // The file is new: a journal left for this loop device by an earlier run must not make it "resume".
  const { journalFile } = journalPaths(stateDir, loop);
  await rm(journalFile, { force: true });
  const bus = new EventBus([sinkFor(mode, mode === 'tty' ? process.stderr : process.stdout)], prepared.redactor);
  emitGate(bus, gate.verdict);
  const outcome = await runInstall({
    ...installInputs(prepared),
    bundle,
    stateDir,
    bus,
    // An image is not a node: its install does not call the node's webhooks.
    webhooks: false,
  });
  bus.close();
  if (outcome.ok) return undefined;
  process.stderr.write(failedInstallText(describeFailedInstall(outcome, prepared.redactor), 'hvinstall image', '; no image written'));
  return ExitCode.installFailed;
}
