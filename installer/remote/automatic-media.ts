/**
 * The OS medium of an automatic install, verified before anything from it is used: the ISO at an
 * http(s) `install.iso_url`, held in RAM or, when it does not fit (or --iso-to-disk), read once
 * through its sha256 with only the root filesystem image and the release metadata kept, its bundle
 * streamed onto COS_PERSISTENT later (and checked again then); the PXE root filesystem image
 * (`--source http…`, the `root=live:` URL); or `local`, the medium this machine booted from. A
 * medium is checked against its pinned or published digest (install-media.ts mediaDigest) before
 * the caller plans, renders or deploys from it, on every path.
 */
import { mkdir, readFile } from 'node:fs/promises';
import path from 'node:path';
import { ExitCode, HvError } from '../../lib/errors.js';
import { findOnPath } from '../../lib/find-on-path.js';
import type { Logger } from '../../lib/logger.js';
import type { BundleSource } from '../steps/bundle-source.js';
import { automaticOsSource, type AutomaticInstall } from './automatic.js';
import { fetchInstallIso, mediaDigest, type DigestOptions, type MediaDigest } from './install-media.js';
import { downloadFile } from './iso.js';
import { decideIsoPlacement, parseMemAvailable, partsProblem } from './iso-placement.js';
import { fetchIsoParts, probeIso, type IsoParts } from './iso-stream.js';
import { openIsoMedia } from './media.js';

/** Where the live system keeps what it downloads (a tmpfs). */
export const MEDIA_DIR = '/run/hvinstall/media';

export interface AutomaticMedia {
  /** The OS source for the plan and the deploy (a squashfs or directory), verified; undefined: the install's default. */
  source?: string;
  /** The opened ISO's bundle/ (it may not exist: resolveBundleSource checks). */
  isoBundle?: string;
  /** The opened ISO's harvester-release.yaml (it may not exist). */
  isoRelease?: string;
  /** The ISO did not fit in RAM: its bundle is streamed to COS_PERSISTENT by the persistent step (its sha256 checked again then). */
  streamedBundle?: BundleSource;
  /** How the medium was checked, for the log and the events. */
  verified: string;
  close(): Promise<void>;
}

export interface MediaOptions {
  /** --source: a path, or the http(s) URL of a root filesystem image (PXE's root=live:). */
  given?: string;
  fallback?: string;
  isoToDisk: boolean;
  trust: { isoSha256?: string; allowUnverified: boolean };
  log: Logger;
  workDir?: string;
}

/** install.iso_url as the log shows it: the URL (its credentials redacted by the log), `local`, or none. */
export function isoUrlOf(media: AutomaticInstall['media']): string {
  return media.kind === 'url' ? media.url : media.kind === 'local' ? 'local' : '(none)';
}

export function isUrl(s: string | undefined): s is string {
  return !!s && /^https?:\/\//i.test(s);
}

function digestOptions(auto: Pick<AutomaticInstall, 'caFile'>, o: MediaOptions, pinned: boolean): DigestOptions {
  return { caFile: auto.caFile, log: o.log, allowUnverified: o.trust.allowUnverified, pinned: pinned && o.trust.isoSha256 ? { sha256: o.trust.isoSha256, from: 'hvinstall.iso_sha256' } : undefined };
}

function describeDigest(d: MediaDigest): string {
  return 'unverified' in d ? d.unverified : `sha256 ${d.sha256} (from ${d.from}) matched`;
}

/** The automatic install's OS medium, chosen as automaticOsSource says and verified before it is returned. */
export async function openAutomaticMedia(auto: Pick<AutomaticInstall, 'media' | 'caFile'>, o: MediaOptions): Promise<AutomaticMedia> {
  const workDir = o.workDir ?? MEDIA_DIR;
  if (isUrl(o.given)) return downloadRootfs(o.given, auto, o, workDir);
  const from = automaticOsSource(auto.media, o.given, o.fallback);
  o.log.info('automatic install: where the OS comes from', { from: from.from, path: 'path' in from ? from.path : undefined, isoUrl: isoUrlOf(auto.media) });
  if (from.from !== 'iso') {
    const verified = from.from === 'default' ? 'the live root, not downloaded' : `${from.path}, a local path given on the command line, not downloaded`;
    return { source: 'path' in from ? from.path : undefined, verified, close: async () => undefined };
  }
  if (auto.media.kind === 'url') {
    const streamed = await streamIfTooBig(auto.media.url, auto, o, workDir);
    if (streamed) return streamed;
  }
  return openIsoInRam(auto, o, workDir);
}

/** PXE: the root filesystem image at root=live:URL, downloaded with resume and checked against its `.sha256`. */
async function downloadRootfs(url: string, auto: Pick<AutomaticInstall, 'caFile'>, o: MediaOptions, workDir: string): Promise<AutomaticMedia> {
  const digest = await mediaDigest(url, 'the OS image', digestOptions(auto, o, false));
  await mkdir(workDir, { recursive: true });
  const r = await downloadFile(url, path.join(workDir, 'rootfs.squashfs'), { sha256: digest.sha256, caFile: auto.caFile, log: o.log });
  o.log.info('OS image ready', { url, path: r.path, bytes: r.bytes, sha256: r.sha256, verified: describeDigest(digest) });
  return { source: r.path, verified: describeDigest(digest), close: async () => undefined };
}

/** The ISO in RAM: downloaded whole and checked (or the boot medium), then opened. */
async function openIsoInRam(auto: Pick<AutomaticInstall, 'media' | 'caFile'>, o: MediaOptions, workDir: string): Promise<AutomaticMedia> {
  await mkdir(workDir, { recursive: true });
  const digest = auto.media.kind === 'url' ? await mediaDigest(auto.media.url, 'the install ISO', digestOptions(auto, o, true)) : undefined;
  const iso = await fetchInstallIso(auto.media, workDir, { log: o.log, caFile: auto.caFile, digest });
  const media = await openIsoMedia(iso.path, workDir, { log: o.log });
  if (!media.found.includes('/rootfs.squashfs')) {
    await media.close();
    throw new HvError(`the ISO ${iso.source} has no /rootfs.squashfs`, { where: 'install.iso_url', hint: 'point iso_url at a Harvester (or hvinstall) ISO', exitCode: ExitCode.checkFailed });
  }
  return {
    source: path.join(media.root, 'rootfs.squashfs'),
    isoBundle: path.join(media.root, 'bundle'),
    isoRelease: path.join(media.root, 'harvester-release.yaml'),
    verified: digest ? describeDigest(digest) : 'the boot medium (iso_url: local), not downloaded',
    close: () => media.close(),
  };
}

/**
 * The ISO streamed to COS_PERSISTENT when it does not fit in RAM (iso-placement.ts), else
 * undefined (the caller holds it in RAM). The whole ISO is read through its sha256 now, keeping only
 * the parts the plan and the deploy need, so nothing from it is used before it is verified.
 */
async function streamIfTooBig(url: string, auto: Pick<AutomaticInstall, 'caFile'>, o: MediaOptions, workDir: string): Promise<AutomaticMedia | undefined> {
  const { log } = o;
  const probe = await probeIso(url, { log, caFile: auto.caFile });
  const mem = parseMemAvailable(await readFile('/proc/meminfo', 'utf8').catch(() => ''));
  const placement = decideIsoPlacement({ isoBytes: probe.bytes, memAvailableBytes: mem, acceptsRanges: probe.acceptsRanges, forced: o.isoToDisk });
  log.info('where the install ISO goes', { url, where: placement.where, why: placement.why, isoBytes: probe.bytes, memAvailableBytes: mem });
  if (placement.where === 'ram') return undefined;
  // The streamed path reads the ISO's directory with xorriso: say so now, before any byte is fetched.
  if (!(await findOnPath('xorriso'))) {
    throw new HvError(`the install ISO must be streamed to disk (${placement.why}), which needs xorriso, and this live system has none`, {
      where: 'install.iso_url',
      hint: 'give the machine enough RAM for the ISO, boot a live image built with xorriso (make iso installs it), or pass --source with the OS image on local storage',
      exitCode: ExitCode.checkFailed,
    });
  }
  const digest = await mediaDigest(url, 'the install ISO', digestOptions(auto, o, true));
  await mkdir(workDir, { recursive: true });
  const parts = await fetchIsoParts(url, workDir, probe, {
    log,
    caFile: auto.caFile,
    sha256: digest.sha256,
    beforeParts: (size) => {
      const problem = partsProblem(size, o.isoToDisk ? undefined : mem);
      if (problem) throw new HvError(`the install ISO cannot be used on this machine: ${problem}`, { where: 'install.iso_url', hint: 'give the machine more RAM, or pass --source with the OS image on local storage', exitCode: ExitCode.checkFailed });
    },
  });
  log.info('install ISO read and verified before touching the disk', { url, verified: describeDigest(digest), isoSha256: parts.isoSha256, squashfs: parts.squashfs, release: parts.release ?? null, files: parts.files.size });
  return streamedMedia(parts, digest, placement.why);
}

function streamedMedia(parts: IsoParts, digest: MediaDigest, why: string): AutomaticMedia {
  // An ISO without /bundle leaves the bundle to --bundle or the live medium, as the RAM download does.
  const streamedBundle: BundleSource | undefined =
    parts.bundle.length > 0 ? { kind: 'iso-stream', parts, sha256: digest.sha256 ?? parts.isoSha256, origin: `${parts.url} (streamed to COS_PERSISTENT: ${why})` } : undefined;
  return { source: parts.squashfs, isoRelease: parts.release, streamedBundle, verified: describeDigest(digest), close: async () => undefined };
}
