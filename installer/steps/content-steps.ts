/** Steps 4–7 of the install: deploy the OS images, bootloader, /oem, persistent layout, finish. */
import { mkdir, readdir, rm, stat } from 'node:fs/promises';
import path from 'node:path';
import { writeFileAtomic } from '../../lib/atomic-write.js';
import { HvError, ExitCode } from '../../lib/errors.js';
import { run } from '../../lib/exec.js';
import { partitionPath } from '../disk/commands.js';
import { bootVisibleSignatures } from '../disk/block.js';
import { installDisks } from './disk-steps.js';
import type { DeployResult, ImageRecord } from '../disk/contracts.js';
import type { InstallPlan, PlannedFile } from '../disk/types.js';
import type { HarvesterConfig } from '../../config/types.js';
import type { MachineFacts } from '../preflight/types.js';
import { copyProgress, type InstallContext, type Step } from './context.js';
import { withMounted } from './mounted.js';
import { deployImages, imageDigestsOnDisk } from '../deploy/index.js';
import { bootloaderStillWritten, describeBootChain, installBootloader } from '../bootloader/index.js';
import { bootEntrySkipReason, planBootEntry, writeBootEntry } from '../bootloader/boot-entry.js';
import { placeNodePath, renderNode, type RenderedFile, type RenderReport } from '../render/index.js';
import { bindDirName, persistentLocation } from '../../node/layout.js';
import { BUNDLE_NODE_PATH, copyBundle, scanTree, SPACE_HEADROOM_BYTES } from './bundle-copy.js';
import { bundleFiles, streamIsoBundle } from '../remote/iso-stream.js';
import { rename, statfs } from 'node:fs/promises';
import { formatBytes } from '../../config/disk-sizes.js';
import type { ImageFacts } from '../render/types.js';
import { machineArch } from './image-facts.js';
import { testStallTimeoutMs } from './test-faults.js';
import { NODE_REPORT_PATH } from '../../node/paths.js';
import type { NodeReportGrant } from '../../config/hvpxe-protocol.js';

export const deployStep: Step = {
  name: 'deploy',
  async run(ctx) {
    const plan = ctx.plan;
    const workDir = path.join(ctx.runDir, 'work');
    await mkdir(workDir, { recursive: true });
    const result: DeployResult = await withMounted(plan, ctx.runDir, ['COS_STATE', 'COS_RECOVERY'], (dirs) =>
      deployImages({
        stateDir: dirs.COS_STATE,
        recoveryDir: dirs.COS_RECOVERY,
        stateDevice: labelDevice(plan, 'COS_STATE'),
        recoveryDevice: labelDevice(plan, 'COS_RECOVERY'),
        source: ctx.source,
        sourceDigests: ctx.sourceDigests,
        systemSizeMiB: plan.systemSizeMiB,
        workDir,
        signal: ctx.signal,
        stallTimeoutMs: testStallTimeoutMs(),
        onProgress: copyProgress(ctx, 'deploy'),
      }),
    );
    for (const img of plan.images) {
      const got = [result.active, result.passive, result.recovery].find((r) => r.label === img.label);
      if (!got || got.file !== img.file) {
        throw new HvError(`deploy did not produce ${img.file} labelled ${img.label}`, { where: 'deploy', exitCode: ExitCode.installFailed });
      }
    }
    return { sourceDigest: result.sourceDigest, contentDigest: result.contentDigest, images: [result.active, result.passive, result.recovery] };
  },
  // By content: each image read back from the disk against its digest, and the source the same.
  async check(ctx, detail) {
    const images = (detail?.images ?? []) as ImageRecord[];
    if (images.length !== 3) return 'the journal does not record the deployed images';
    if (ctx.sourceDigests && detail?.contentDigest !== ctx.sourceDigests.digest) return `the OS source is not the one deployed (content ${ctx.sourceDigests.digest}, deployed ${String(detail?.contentDigest)})`;
    // The chroot step's commands change active.img; it records what it left.
    const activeNow = ctx.recorded?.('chroot')?.activeDigest;
    return withMounted(ctx.plan, ctx.runDir, ['COS_STATE', 'COS_RECOVERY'], async (dirs) => {
      const on = (img: ImageRecord) => (img.label === 'COS_SYSTEM' ? 'COS_RECOVERY' : 'COS_STATE');
      for (const img of images) {
        const st = await stat(path.join(dirs[on(img)], img.file)).catch(() => undefined);
        if (!st || st.size !== img.sizeBytes) return `${img.file} is ${st ? `${st.size} bytes` : 'missing'}, deployed ${img.sizeBytes}`;
      }
      // Together: passive and recovery are active's bytes but for their labels (read-back.ts).
      const got = await imageDigestsOnDisk(images.map((img) => path.join(dirs[on(img)], img.file)), ctx.signal);
      for (const [k, img] of images.entries()) {
        const digest = img.label === 'COS_ACTIVE' && typeof activeNow === 'string' ? activeNow : img.digest;
        if (got[k] !== digest) return `${img.file} read back from ${labelDevice(ctx.plan, on(img))} is ${got[k]}, not the ${digest} deployed`;
      }
      return undefined;
    }, { readOnly: true });
  },
};

/** The device of the planned partition with this label. */
function labelDevice(plan: InstallPlan, label: string): string | undefined {
  const p = plan.partitions.find((x) => x.label === label);
  return p ? partitionPath(plan.device, p.number) : undefined;
}

export const bootloaderStep: Step = {
  name: 'bootloader',
  async run(ctx) {
    const plan = ctx.plan;
    const efi = plan.partitions.find((p) => p.role === 'efi');
    const labelCheckDevices = (await bootVisibleSignatures(installDisks(plan))).map((s) => s.DEVNAME!);
    const bootChain = plan.bootChain ?? { kind: 'own', why: 'the plan did not inspect the source' };
    ctx.bus.emit({ type: 'message', level: 'info', step: 'bootloader', message: `boot chain: ${describeBootChain(bootChain)}` });
    const written = await withMounted(plan, ctx.runDir, ['COS_STATE', 'COS_OEM'], (dirs) =>
      installBootloader({
        firmware: plan.firmware,
        device: plan.device,
        ...(efi ? { espDevice: partitionPath(plan.device, efi.number) } : {}),
        stateDir: dirs.COS_STATE,
        oemDir: dirs.COS_OEM,
        thirdPartyKernelArgs: ctx.config.os?.additionalKernelArguments,
        tty: ctx.config.install?.tty,
        labelCheckDevices,
        bootChain,
        source: ctx.source,
        signal: ctx.signal,
      }),
    );
    // After the files: the entry points at them. Best effort; the removable path boots without it.
    if (plan.firmware === 'efi' && efi) {
      const entry = planBootEntry(bootChain, plan.device, efi.number);
      const skip = bootEntrySkipReason(plan.device);
      const outcome = skip ? { kind: 'skipped' as const, message: `no UEFI boot entry: ${skip}` } : await writeBootEntry(entry);
      ctx.bus.emit({ type: 'message', level: outcome.kind === 'warning' ? 'warn' : 'info', step: 'bootloader', message: outcome.message });
      return { firmware: plan.firmware, table: plan.table, bootChain: bootChain.kind, bootEntry: outcome.kind, espFiles: written.espFiles };
    }
    return { firmware: plan.firmware, table: plan.table, bootChain: bootChain.kind, espFiles: written.espFiles };
  },
  // By content: the ESP's files and BIOS's core.img, read back from the disk.
  async check(ctx, detail) {
    const plan = ctx.plan;
    const espFiles = detail?.espFiles;
    if (typeof espFiles !== 'object' || espFiles === null) return 'the journal does not record what the bootloader step wrote';
    const efi = plan.partitions.find((p) => p.role === 'efi');
    return withMounted(plan, ctx.runDir, ['COS_STATE'], (dirs) =>
      bootloaderStillWritten(
        { firmware: plan.firmware, device: plan.device, ...(efi ? { espDevice: partitionPath(plan.device, efi.number) } : {}), stateDir: dirs.COS_STATE },
        { espFiles: espFiles as Record<string, string> },
      ), { readOnly: true });
  },
};

/** Removes temp files an interrupted atomic write left behind (`.name.xxxx.tmp`). */
async function removeStaleTemps(dir: string): Promise<void> {
  for (const e of await readdir(dir, { withFileTypes: true }).catch(() => [])) {
    const p = path.join(dir, e.name);
    if (e.isDirectory() && e.name !== 'lost+found') await removeStaleTemps(p);
    else if (e.isFile() && /^\..+\.[0-9a-f]{12}\.tmp$/.test(e.name)) await rm(p, { force: true });
  }
}

/**
 * The address a management NIC has while the installer runs (DHCP installs): recorded in the node
 * identity so the node can tell when DHCP later hands out another. The first global IPv4 of the
 * first management NIC (by name or MAC) that has one.
 */
export function managementAddressOf(config: HarvesterConfig, facts: MachineFacts): { managementAddress?: string } {
  const mi = config.install?.managementInterface;
  if (String(mi?.method ?? 'dhcp').toLowerCase() === 'static') return {};
  for (const want of mi?.interfaces ?? []) {
    const mac = want.hwAddr?.trim().toLowerCase();
    const nic = facts.nics.find((n) => (want.name && n.name === want.name) || (mac && n.mac?.toLowerCase() === mac));
    const addr = nic?.ipv4?.[0];
    if (addr) return { managementAddress: addr };
  }
  return {};
}

/** The renderer's files for this node. */
export function renderFiles(config: HarvesterConfig, facts: MachineFacts, plan: InstallPlan): RenderedFile[] {
  return renderFor(config, facts, plan).files;
}

function renderFor(config: HarvesterConfig, facts: MachineFacts, plan: InstallPlan): RenderReport {
  const hasDataPartition = plan.partitions.some((p) => p.role === 'data') || !!plan.dataDisk;
  return renderNode(
    config,
    {
      cpuCount: facts.cpu.threads || facts.cpu.cores,
      nics: facts.nics.filter((n) => !n.loopback).map((n) => ({ name: n.name, mac: (n.mac ?? '').toLowerCase(), permMac: n.permMac ?? '' })),
      hasDataPartition,
      ...managementAddressOf(config, facts),
      arch: machineArch(),
      ...(plan.image ? { image: plan.image } : {}),
    },
    // Seeded by the plan, so a re-run renders byte-identical files (hostname suffix, password salt).
    { seed: plan.digest },
  );
}

/**
 * The plan's file list with the renderer's files in place of the minimal set, and the image facts
 * (who bootstraps, the release metadata) the oem step renders with.
 */
export function withRenderedFileList(config: HarvesterConfig, facts: MachineFacts, planned: InstallPlan, image?: ImageFacts): InstallPlan {
  const withImage: InstallPlan = image ? { ...planned, image, notes: [...planned.notes, `bootstrap: ${image.why}`] } : planned;
  const report = renderFor(config, facts, withImage);
  // The renderer's warnings (an addon left out, a setting ignored) belong where the operator reads the plan.
  const pins = report.nicPins.length ? [`NIC names pinned at boot by permanent MAC (ifname= in /oem/grubenv): ${report.nicPins.map((p) => `${p.name} ${p.mac}`).join(', ')}`] : [];
  const notes = [...pins, ...report.warnings.map((w) => `render: ${w}`)];
  const plan: InstallPlan = notes.length ? { ...withImage, notes: [...withImage.notes, ...notes] } : withImage;
  const files: PlannedFile[] = report.files.map((f) => {
    const where = placeNodePath(f.path, plan.persistentStatePaths);
    return {
      on: where.partition === 'COS_PERSISTENT' ? 'COS_PERSISTENT' : 'COS_OEM',
      path: where.partition === 'none' ? f.path : where.relPath,
      mode: f.mode,
      what: `${f.path}${f.secret ? ' (secret)' : ''}`,
    };
  });
  return { ...plan, files: [...files, ...plan.files.filter((f) => f.path.startsWith('install/'))] };
}

export const oemStep: Step = {
  name: 'oem',
  async run(ctx) {
    const plan = ctx.plan;
    const rendered = renderFiles(ctx.config, ctx.nodeFacts ?? (await ctx.facts()), plan);
    const written: string[] = [];
    await withMounted(plan, ctx.runDir, ['COS_OEM', 'COS_PERSISTENT'], async (dirs) => {
      await removeStaleTemps(dirs.COS_OEM);
      await removeStaleTemps(dirs.COS_PERSISTENT);
      for (const f of rendered) {
        const where = placeNodePath(f.path, plan.persistentStatePaths);
        if (where.partition === 'none') {
          throw new HvError(`the renderer produced ${f.path}, which has no place on the installed disk: ${where.reason}`, { where: 'oem', exitCode: ExitCode.installFailed });
        }
        const root = where.partition === 'COS_OEM' ? dirs.COS_OEM : dirs.COS_PERSISTENT;
        await writeFileAtomic(path.join(root, where.relPath), f.content, { mode: f.secret ? f.mode & 0o700 : f.mode });
        written.push(f.path);
      }
    });
    return { files: written };
  },
};

export async function createPersistentLayout(root: string, plan: InstallPlan): Promise<string[]> {
  const made: string[] = [];
  await mkdir(path.join(root, '.state'), { recursive: true, mode: 0o755 });
  for (const p of plan.persistentStatePaths) {
    const dir = path.join(root, '.state', bindDirName(p));
    await mkdir(dir, { recursive: true, mode: 0o755 });
    made.push(dir.slice(root.length));
  }
  return made;
}

/** Where the image bundle goes, relative to COS_PERSISTENT's root. */
export function bundleDestination(persistentStatePaths: string[]): string {
  const rel = persistentLocation(BUNDLE_NODE_PATH, persistentStatePaths);
  if (!rel) {
    throw new HvError(`${BUNDLE_NODE_PATH} is not under a persistent state path, so the image bundle has no place on COS_PERSISTENT`, {
      where: 'persistent',
      hint: 'keep /var/lib/rancher in the persistent state paths (it is one by default), or install with --bundle none',
      exitCode: ExitCode.installFailed,
    });
  }
  return rel;
}

interface BundleDetail {
  source: string;
  files?: number;
  bytes?: number;
}

export const persistentStep: Step = {
  name: 'persistent',
  async run(ctx) {
    const bundle = ctx.bundle;
    return withMounted(ctx.plan, ctx.runDir, ['COS_PERSISTENT'], async (dirs) => {
      const made = await createPersistentLayout(dirs.COS_PERSISTENT, ctx.plan);
      if (bundle.kind === 'none') {
        // A bundle an earlier run of this install copied (then with --bundle DIR) must not linger.
        const rel = persistentLocation(BUNDLE_NODE_PATH, ctx.plan.persistentStatePaths);
        if (rel) await rm(path.join(dirs.COS_PERSISTENT, rel), { recursive: true, force: true });
        ctx.bus.emit({ type: 'message', level: 'info', step: 'persistent', message: `no image bundle copied: ${bundle.why}` });
        return { bindDirs: made.length, bundle: { source: 'none', why: bundle.why } };
      }
      const rel = bundleDestination(ctx.plan.persistentStatePaths);
      if (bundle.kind === 'iso-stream') {
        const r = await streamBundleInPlace(ctx, bundle, path.join(dirs.COS_PERSISTENT, rel));
        ctx.bus.emit({ type: 'message', level: 'info', step: 'persistent', message: `image bundle streamed from ${bundle.origin}: ${r.files} files at COS_PERSISTENT/${rel}; the ISO's sha256 ${r.sha256}${bundle.sha256 ? ' matches' : ' (none given to check)'}` });
        return { bindDirs: made.length, bundle: { source: `iso:${bundle.parts.url}`, origin: bundle.origin, destination: rel, files: r.files, bytes: r.bytes, sha256: r.sha256 } };
      }
      const r = await copyBundle(bundle.path, path.join(dirs.COS_PERSISTENT, rel), {
        signal: ctx.signal,
        onProgress: copyProgress(ctx, 'persistent'),
      });
      ctx.bus.emit({
        type: 'message',
        level: 'info',
        step: 'persistent',
        message: `image bundle from ${bundle.origin} (${bundle.path}): ${r.files} files, ${formatBytes(r.bytes)} at COS_PERSISTENT/${rel} (${r.copied} copied, ${r.kept} kept, ${r.removed.length} stale removed)`,
      });
      return {
        bindDirs: made.length,
        bundle: { source: bundle.path, origin: bundle.origin, destination: rel, files: r.files, bytes: r.bytes, copied: r.copied, kept: r.kept, removed: r.removed.length },
      };
    });
  },
  // Cheap (no mount): the bundle this run would copy against the one an earlier run copied.
  async check(ctx, detail) {
    const was = detail?.bundle as BundleDetail | undefined;
    const before = was?.source ?? 'none';
    const now = ctx.bundle.kind === 'dir' ? ctx.bundle.path : ctx.bundle.kind === 'iso-stream' ? `iso:${ctx.bundle.parts.url}` : 'none';
    if (before !== now) return `the image bundle was ${before}, now ${now}`;
    if (ctx.bundle.kind !== 'dir') return undefined;
    const files = (await scanTree(ctx.bundle.path)).filter((e) => e.kind === 'file');
    const bytes = files.reduce((n, f) => n + f.size, 0);
    if (files.length !== was?.files || bytes !== was?.bytes) return `the image bundle ${now} now holds ${files.length} files (${bytes} bytes), ${was?.files ?? '?'} (${was?.bytes ?? '?'} bytes) were copied`;
    return undefined;
  },
};

/**
 * The ISO's bundle, written from its one ordered read into a staging directory beside the bundle's
 * place, which replaces it only once the ISO's sha256 (and the root filesystem fetched earlier)
 * checked out. Refused up front when COS_PERSISTENT cannot hold it.
 */
async function streamBundleInPlace(ctx: Parameters<Step['run']>[0], bundle: Extract<InstallContext['bundle'], { kind: 'iso-stream' }>, dest: string): Promise<{ files: number; bytes: number; sha256: string }> {
  const staging = `${dest}.streaming`;
  await rm(staging, { recursive: true, force: true });
  await mkdir(path.dirname(dest), { recursive: true });
  const need = bundleFiles(bundle.parts.files).reduce((n, f) => n + f.file.size, 0);
  const fs = await statfs(path.dirname(dest));
  if (need + SPACE_HEADROOM_BYTES > fs.bavail * fs.bsize) {
    throw new HvError(`the image bundle does not fit on COS_PERSISTENT: ${formatBytes(need)} to write plus ${formatBytes(SPACE_HEADROOM_BYTES)} headroom, ${formatBytes(fs.bavail * fs.bsize)} free`, {
      where: dest,
      hint: 'make COS_PERSISTENT larger (install.persistent_partition_size), or install without the bundle (--bundle none)',
      exitCode: ExitCode.installFailed,
    });
  }
  try {
    const r = await streamIsoBundle(bundle.parts, staging, { caFile: bundle.parts.caFile, sha256: bundle.sha256, signal: ctx.signal, log: ctx.log, onProgress: (done, total) => ctx.bus.bytes('persistent', done, total) });
    await rm(dest, { recursive: true, force: true });
    await rename(staging, dest);
    return { files: r.files, bytes: need, sha256: r.sha256 };
  } catch (err) {
    await rm(staging, { recursive: true, force: true });
    throw err;
  }
}

/** Writes the install log and journal to COS_OEM/install (the log is redacted as it is written). */
export async function saveInstallRecord(plan: InstallPlan, runDir: string, logText: string, journalText: string): Promise<void> {
  await withMounted(plan, runDir, ['COS_OEM'], async (dirs) => {
    await writeFileAtomic(path.join(dirs.COS_OEM, 'install', 'install.log'), logText, { mode: 0o600 });
    await writeFileAtomic(path.join(dirs.COS_OEM, 'install', 'journal.json'), journalText, { mode: 0o644 });
  });
}

/** hvpxe's node-report grant on COS_OEM, root-only (it holds the node's token). */
async function saveNodeReport(plan: InstallPlan, runDir: string, grant: NodeReportGrant): Promise<void> {
  await withMounted(plan, runDir, ['COS_OEM'], async (dirs) => {
    await writeFileAtomic(path.join(dirs.COS_OEM, path.relative('/oem', NODE_REPORT_PATH)), JSON.stringify(grant, null, 2) + '\n', { mode: 0o600 });
  });
}

export function makeFinishStep(record: () => Promise<{ log: string; journal: string; nodeReport?: NodeReportGrant }>): Step {
  return {
    name: 'finish',
    async run(ctx) {
      const { log, journal, nodeReport } = await record();
      if (nodeReport) await saveNodeReport(ctx.plan, ctx.runDir, nodeReport);
      await saveInstallRecord(ctx.plan, ctx.runDir, log, journal);
      await run('sync', [], { timeoutMs: 600_000 });
      return { record: `/oem/install/install.log, /oem/install/journal.json${nodeReport ? `, ${NODE_REPORT_PATH}` : ''}` };
    },
  };
}
