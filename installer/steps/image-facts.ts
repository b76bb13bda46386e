/**
 * The facts of the OS image being installed that the renderer takes as plain input: who
 * bootstraps the node (lib/image-profile.ts, the one rule) and the release metadata of the media
 * (the image's /etc/harvester-release.yaml and, in automatic mode, the ISO root's). A directory
 * source is read in place; a squashfs source through unsquashfs, without mounting it.
 */
import { lstat, mkdtemp, readFile, rm, stat } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { ExitCode, HvError } from '../../lib/errors.js';
import { run } from '../../lib/exec.js';
import { Host } from '../../lib/host.js';
import { bootstrapperFacts, chooseBootstrapper } from '../../lib/image-profile.js';
import type { OsSource } from '../disk/contracts.js';
import { IMAGE_RELEASE_PATH, mediaRelease, parseReleaseMetadata, type MediaRelease } from '../render/release.js';
import { HARVESTER_INSTALLER_PATH, templatesInBinary, type HarvesterTemplates } from '../render/harvester-templates.js';
import type { ImageFacts } from '../render/types.js';

/** A squashfs image read with unsquashfs: enough of Host for existence checks and small reads. */
class SquashfsHost extends Host {
  constructor(readonly image: string) {
    super('/');
  }

  override async exists(p: string): Promise<boolean> {
    return (await this.existing([p])).has(p);
  }

  /** One unsquashfs run for all paths: -lls with the paths as extract filters lists those entries that exist, and nothing else. */
  override async existing(paths: readonly string[]): Promise<Set<string>> {
    if (paths.length === 0) return new Set();
    const r = await run('unsquashfs', ['-no-progress', '-lls', this.image, ...paths.map((p) => p.replace(/^\/+/, ''))], { allowFailure: true, timeoutMs: 120_000 });
    if (r.exitCode !== 0) throw new HvError(`cannot list ${this.image}: ${r.stderr.trim().split('\n').at(-1) ?? ''}`, { where: this.image, hint: 'check it is a squashfs image with `unsquashfs -s`', exitCode: ExitCode.usage });
    const lines = r.stdout.split('\n');
    return new Set(paths.filter((p) => lines.some((l) => l.endsWith(` squashfs-root${p}`) || l.includes(` squashfs-root${p} -> `))));
  }

  override async readText(p: string): Promise<string | undefined> {
    if (!(await this.exists(p))) return undefined;
    const r = await run('unsquashfs', ['-no-progress', '-cat', this.image, p.replace(/^\/+/, '')], { allowFailure: true, timeoutMs: 120_000 });
    return r.exitCode === 0 ? r.stdout : undefined;
  }
}

/** The source as a Host: a directory read in place, a squashfs through unsquashfs. */
function hostOf(source: OsSource): Host {
  return source.kind === 'dir' ? new Host(source.path) : new SquashfsHost(source.path);
}

async function releaseIn(host: Host, where: string): Promise<MediaRelease | undefined> {
  const text = await host.readText(IMAGE_RELEASE_PATH);
  return text === undefined ? undefined : parseReleaseMetadata(text, where);
}

/** Reads a release file given by path (the ISO root's, or `hvinstall render --release`). */
async function readReleaseFile(file: string): Promise<MediaRelease> {
  let text: string;
  try {
    text = await readFile(file, 'utf8');
  } catch (err) {
    throw new HvError(`cannot read ${file}: ${(err as NodeJS.ErrnoException).code ?? (err as Error).message}`, { where: file, exitCode: ExitCode.usage });
  }
  return parseReleaseMetadata(text, file);
}

/** A regular file of the image as bytes (a squashfs's through unsquashfs into a scratch directory), or undefined. */
async function readImageFile(source: OsSource, p: string): Promise<Buffer | undefined> {
  const rel = p.replace(/^\/+/, '');
  if (source.kind === 'dir') {
    const file = path.join(source.path, rel);
    return (await lstat(file).catch(() => undefined))?.isFile() ? readFile(file) : undefined;
  }
  const dir = await mkdtemp(path.join(os.tmpdir(), 'hvinstall-image-'));
  try {
    await run('unsquashfs', ['-no-progress', '-d', path.join(dir, 'x'), source.path, rel], { allowFailure: true, timeoutMs: 300_000 });
    const file = path.join(dir, 'x', rel);
    return (await lstat(file).catch(() => undefined))?.isFile() ? await readFile(file) : undefined;
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}

/** Harvester's addon and dashboard templates, embedded in the image's harvester-installer (render/harvester-templates.ts). */
async function installerTemplates(source: OsSource): Promise<HarvesterTemplates | undefined> {
  const binary = await readImageFile(source, HARVESTER_INSTALLER_PATH);
  const where = source.kind === 'dir' ? path.join(source.path, HARVESTER_INSTALLER_PATH) : `${source.path}:${HARVESTER_INSTALLER_PATH}`;
  return binary ? templatesInBinary(binary, where) : undefined;
}

/**
 * The image facts of an install source. `isoRelease`: the ISO root's harvester-release.yaml when
 * the install comes from an ISO (it may be absent).
 */
export async function imageFactsOf(source: OsSource, opts: { isoRelease?: string; isoReleaseRequired?: boolean } = {}): Promise<ImageFacts> {
  const host = hostOf(source);
  const choice = chooseBootstrapper(await bootstrapperFacts(host));
  const image = await releaseIn(host, source.kind === 'dir' ? path.join(source.path, IMAGE_RELEASE_PATH) : `${source.path}:${IMAGE_RELEASE_PATH}`);
  let iso: MediaRelease | undefined;
  if (opts.isoRelease) {
    const present = await stat(opts.isoRelease).then(() => true, () => false);
    if (present || opts.isoReleaseRequired) iso = await readReleaseFile(opts.isoRelease);
  }
  const release = mediaRelease(image, iso);
  const templates = choice.bootstrapper === 'rancherd' ? await installerTemplates(source) : undefined;
  return { bootstrapper: choice.bootstrapper, why: choice.why, ...(release ? { release } : {}), ...(templates ? { templates } : {}) };
}

/** Go's name for this machine's architecture (Harvester decides on runtime.GOARCH). */
export function machineArch(): 'amd64' | 'arm64' {
  return process.arch === 'arm64' ? 'arm64' : 'amd64';
}
