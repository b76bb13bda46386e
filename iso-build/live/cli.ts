/**
 * `node dist/iso-build/live/cli.js --out DIR [options]` (what `make iso` runs): builds the live
 * installer and its hybrid ISO, and next to it the PXE artifacts and checksum lists, named as
 * Harvester publishes them; prints what it built as JSON (also written to DIR/build.json).
 */
import { readFile, stat } from 'node:fs/promises';
import path from 'node:path';
import { parseArgs } from 'node:util';
import { parse as parseYaml } from 'yaml';
import { writeFileAtomic } from '../../lib/atomic-write.js';
import { describeError, ExitCode, HvError } from '../../lib/errors.js';
import { harvesterArtifactNames } from '../../lib/harvester-artifacts.js';
import { requireBuildTools } from '../host-tools.js';
import { buildEpoch } from '../reproducible.js';
import { fetchSignedBootChain } from '../signed-boot.js';
import { chooseVersion, publishArtifacts } from './artifacts.js';
import { buildLiveInstaller } from './build-live.js';
import { buildIsoImage, harvesterCfg, isoGrubCfg } from './iso-image.js';

const USAGE = `usage: node dist/iso-build/live/cli.js --out DIR [--version V] [--bundle DIR] [--release-file F]
          [--os-image SQUASHFS] [--extra-cmdline STR] [--grub-timeout S] [--cache DIR] [--kernel-package PKG] [--repo DIR]

Builds the live installer (DIR/live/: vmlinuz, initrd, initrd-pxe, live.squashfs, rootfs.squashfs),
the hybrid BIOS/UEFI ISO, and DIR/harvester-<V>-{vmlinuz,initrd}-amd64,
harvester-<V>-rootfs-amd64.squashfs, harvester-<V>-amd64.iso, harvester-<V>-amd64.{sha512,sha256}.
  --version V          the version in names and the grub menu (default: harvester: of --release-file,
                       else v<package.json version>)
  --bundle DIR         the image bundle carried as bundle/ (default: an empty one)
  --release-file F     carried as /harvester-release.yaml
  --os-image SQUASHFS  the OS to install (default: the test OS, built)
  --extra-cmdline STR  kernel parameters every grub entry adds (grub's extra_iso_cmdline)
  --grub-timeout S     seconds the grub menu waits (default 10)
  --cache DIR          downloaded Debian packages (default: $HV_E2E_CACHE, else .e2e-cache)
The build time is SOURCE_DATE_EPOCH, else the last commit's: the same inputs give the same bytes.`;

const OPTIONS = {
  out: { type: 'string' },
  cache: { type: 'string' },
  'kernel-package': { type: 'string' },
  repo: { type: 'string' },
  version: { type: 'string' },
  bundle: { type: 'string' },
  'release-file': { type: 'string' },
  'os-image': { type: 'string' },
  'extra-cmdline': { type: 'string' },
  'grub-timeout': { type: 'string' },
  help: { type: 'boolean' },
} as const;

type BuildArgs = ReturnType<typeof parseArgs<{ args: string[]; options: typeof OPTIONS }>>['values'];

/** Checks the inputs before the minutes of building: the bundle, the OS image, the grub settings. */
async function checkInputs(values: BuildArgs, grubTimeout: number | undefined): Promise<void> {
  const isDir = (p: string) => stat(p).then((st) => st.isDirectory()).catch(() => false);
  const isFile = (p: string) => stat(p).then((st) => st.isFile()).catch(() => false);
  if (values.bundle && !(await isDir(values.bundle))) {
    throw new HvError(`--bundle ${values.bundle} is not a directory`, { hint: 'pass an image bundle directory (metadata.yaml and the image archives)', exitCode: ExitCode.usage });
  }
  if (values['os-image'] && !(await isFile(values['os-image']))) {
    throw new HvError(`--os-image ${values['os-image']} is not a file`, { hint: 'pass a squashfs of the OS to install (a Harvester ISO\'s rootfs.squashfs)', exitCode: ExitCode.usage });
  }
  if (grubTimeout !== undefined) isoGrubCfg(grubTimeout);
  if (values['extra-cmdline'] !== undefined) harvesterCfg('v', values['extra-cmdline']);
}

/** --release-file parsed, or undefined when none is given. */
async function readRelease(file: string | undefined): Promise<unknown> {
  if (!file) return undefined;
  const text = await readFile(file, 'utf8').catch((err: NodeJS.ErrnoException) => {
    throw new HvError(`cannot read --release-file ${file}: ${err.code ?? err.message}`, { exitCode: ExitCode.usage });
  });
  return parseYaml(text);
}

type LiveBuild = Awaited<ReturnType<typeof buildLiveInstaller>>;
type Published = Awaited<ReturnType<typeof publishArtifacts>>;

/** What the build made and from what: printed, and kept as DIR/build.json. */
function buildReport(
  outDir: string,
  b: { version: string; versionFrom: string; epoch: number; epochFrom: string; live: LiveBuild; signed: { debs: string[] }; published: Published; started: number },
): Record<string, unknown> {
  const { live, published } = b;
  const names = harvesterArtifactNames(b.version);
  return {
    version: b.version,
    versionFrom: b.versionFrom,
    epoch: b.epoch,
    epochFrom: b.epochFrom,
    mediumId: live.mediumId,
    kernelVersion: live.kernelVersion,
    inputs: { kernel: path.basename(live.kernelDeb), signedBoot: b.signed.debs.map((d) => path.basename(d)) },
    missingOptionalTools: live.missingOptionalTools,
    iso: path.join(outDir, names.iso),
    pxe: { kernel: path.join(outDir, names.kernel), initrd: path.join(outDir, names.initrd), rootfs: path.join(outDir, names.rootfs) },
    live: { kernel: live.kernel, initrd: live.initrd, pxeInitrd: live.pxeInitrd, liveSquashfs: live.liveSquashfs, osSquashfs: live.osSquashfs },
    checksums: { sha512: published.sha512File, sha256: published.sha256File },
    artifacts: published.artifacts,
    seconds: Math.round((Date.now() - b.started) / 100) / 10,
  };
}

async function main(argv: string[]): Promise<number> {
  const { values } = parseArgs({ args: argv, options: OPTIONS });
  if (values.help) {
    process.stdout.write(USAGE + '\n');
    return ExitCode.ok;
  }
  if (!values.out) throw new HvError('--out is required', { hint: USAGE, exitCode: ExitCode.usage });
  const started = Date.now();
  const repo = values.repo ?? path.resolve(import.meta.dirname, '../../..');
  const outDir = path.resolve(values.out);
  const cacheDir = values.cache ?? process.env.HV_E2E_CACHE ?? path.join(repo, '.e2e-cache');
  const grubTimeout = values['grub-timeout'] === undefined ? undefined : Number(values['grub-timeout']);
  await requireBuildTools();
  await checkInputs(values, grubTimeout);

  const release = await readRelease(values['release-file']);
  const pkg = JSON.parse(await readFile(path.join(repo, 'package.json'), 'utf8')) as { version: string };
  const { version, from: versionFrom } = chooseVersion(values.version, release, pkg.version);
  const { epoch, from: epochFrom } = await buildEpoch(repo);

  const signed = await fetchSignedBootChain(cacheDir);
  const live = await buildLiveInstaller({ repoDir: repo, outDir: path.join(outDir, 'live'), cacheDir, kernelPackage: values['kernel-package'], epoch, osImage: values['os-image'] });
  const iso = path.join(outDir, 'live', 'live.iso');
  await buildIsoImage({
    kernel: live.kernel,
    initrd: live.initrd,
    liveSquashfs: live.liveSquashfs,
    osSquashfs: live.osSquashfs,
    mediumId: live.mediumId,
    signed,
    version,
    extraCmdline: values['extra-cmdline'],
    grubTimeout,
    bundleDir: values.bundle,
    releaseFile: values['release-file'],
    epoch,
    out: iso,
  });
  const published = await publishArtifacts(outDir, version, { kernel: live.kernel, pxeInitrd: live.pxeInitrd, osSquashfs: live.osSquashfs, iso });
  const text = JSON.stringify(buildReport(outDir, { version, versionFrom, epoch, epochFrom, live, signed, published, started }), null, 2) + '\n';
  await writeFileAtomic(path.join(outDir, 'build.json'), text);
  process.stdout.write(text);
  return ExitCode.ok;
}

main(process.argv.slice(2)).then(
  (code) => (process.exitCode = code),
  (err: unknown) => {
    process.stderr.write(`iso-build/live: ${describeError(err)}\n`);
    process.exitCode = (err as { exitCode?: number }).exitCode ?? ExitCode.usage;
  },
);
