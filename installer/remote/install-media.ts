/**
 * The install ISO for an automatic install: download `iso_url` (verified against a pinned sha256, or
 * the `<iso_url>.sha256` file next to it — hvpxe serves one for every artifact; a medium with no
 * digest is refused unless the command line consents), or use the boot medium for `local`.
 * Everything here happens before any disk is touched; a checksum mismatch ends the install here.
 */
import path from 'node:path';
import { HvError, ExitCode } from '../../lib/errors.js';
import { fetchBytes, FetchError } from '../../lib/http-fetch.js';
import type { Logger } from '../../lib/logger.js';
import { downloadFile, type DownloadOptions } from './iso.js';
import { findLocalIso } from './media.js';
import type { MediaSource } from './automatic.js';

export interface InstallIso {
  path: string;
  sha256?: string;
  verified: boolean;
  source: string;
}

/** The sha256 published next to a URL (`<url>.sha256`, sha256sum format), if there is one. */
export async function fetchPublishedSha256(url: string, opts: { caFile?: string; timeoutMs?: number } = {}): Promise<string | undefined> {
  try {
    const r = await fetchBytes(`${url}.sha256`, { attempts: 2, retryDelayMs: 1000, timeoutMs: opts.timeoutMs ?? 15_000, maxBytes: 4096, caFile: opts.caFile });
    const m = /^([0-9a-fA-F]{64})\b/.exec(r.body.toString('utf8').trim());
    return m?.[1].toLowerCase();
  } catch (err) {
    if (err instanceof FetchError && err.kind === 'http-client') return undefined;
    throw err;
  }
}

/** What a medium fetched over HTTP is checked against: a digest and where it came from, or the operator's consent to none. */
export type MediaDigest = { sha256: string; from: string } | { sha256?: undefined; unverified: string };

export interface DigestOptions {
  /** A digest given for this run (hvinstall.iso_sha256=, --sha256): wins over the published one. */
  pinned?: { sha256: string; from: string };
  /** hvinstall.unverified_media=true on the command line: install a medium nobody published a digest for. */
  allowUnverified?: boolean;
  caFile?: string;
  log?: Logger;
}

/**
 * The digest a medium must match before anything from it is used: the pinned one, else the
 * `<url>.sha256` published next to it (hvpxe publishes one for every artifact). A medium with
 * neither is refused before anything is downloaded, unless this run's command line consents; a
 * `.sha256` that cannot be fetched (network, 5xx) is a failure, not a missing digest.
 */
export async function mediaDigest(url: string, what: string, opts: DigestOptions = {}): Promise<MediaDigest> {
  if (opts.pinned) {
    if (!/^[0-9a-fA-F]{64}$/.test(opts.pinned.sha256)) throw new HvError(`${opts.pinned.from}: '${opts.pinned.sha256}' is not a sha256 (64 hex digits)`, { where: opts.pinned.from, exitCode: ExitCode.usage });
    return { sha256: opts.pinned.sha256.toLowerCase(), from: opts.pinned.from };
  }
  const published = await fetchPublishedSha256(url, { caFile: opts.caFile }).catch((err: Error) => {
    throw new HvError(`cannot verify ${what} ${url}: fetching ${url}.sha256 failed: ${err.message}`, {
      where: `${url}.sha256`,
      hint: 'check the server; nothing was downloaded and no disk was touched',
      exitCode: ExitCode.installFailed,
    });
  });
  if (published) return { sha256: published, from: `${url}.sha256` };
  if (opts.allowUnverified) {
    const why = `no ${url}.sha256 is published and the command line has hvinstall.unverified_media=true: ${what} is installed unverified`;
    opts.log?.warn('installing an unverified medium', { url, why });
    return { unverified: why };
  }
  throw new HvError(`cannot verify ${what} ${url}: no ${url}.sha256 is published next to it`, {
    where: url,
    hint: `publish its digest (sha256sum FILE > FILE.sha256; hvpxe publishes one for every artifact), pin it with hvinstall.iso_sha256=<hex> on the kernel command line, or add hvinstall.unverified_media=true to install it unverified`,
    exitCode: ExitCode.checkFailed,
  });
}

/**
 * The install ISO: `local` is the boot medium (trusted as booted); a URL is downloaded and checked
 * against its digest (mediaDigest) before the caller opens it.
 */
export async function fetchInstallIso(
  media: MediaSource,
  workDir: string,
  opts: Omit<DownloadOptions, 'log' | 'sha256'> & { log?: Logger; digest?: MediaDigest } = {},
): Promise<InstallIso> {
  if (media.kind === 'none') {
    throw new HvError('iso_url is required in automatic installation', { where: 'install.iso_url', hint: 'set install.iso_url to an http(s) URL of the ISO, or "local"', exitCode: ExitCode.checkFailed });
  }
  if (media.kind === 'local') {
    const dev = await findLocalIso();
    opts.log?.info('using the boot medium as the install ISO (not checked against a digest: it is the medium this machine booted)', { device: dev });
    return { path: dev, verified: false, source: 'local' };
  }
  const digest = opts.digest ?? (await mediaDigest(media.url, 'the install ISO', { caFile: opts.caFile, log: opts.log }));
  const dest = path.join(workDir, 'install.iso');
  const r = await downloadFile(media.url, dest, { ...opts, sha256: digest.sha256 });
  opts.log?.info('install ISO ready', { path: r.path, bytes: r.bytes, sha256: r.sha256, verified: !!digest.sha256, digestFrom: digest.sha256 ? digest.from : undefined, resumed: r.resumed });
  return { path: r.path, sha256: r.sha256, verified: !!digest.sha256, source: media.url };
}
