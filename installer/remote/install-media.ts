/**
 * The install ISO for an automatic install: download `iso_url` (verified against a given sha256, or
 * the `<iso_url>.sha256` file next to it — hvpxe serves one for every artifact), or use the boot
 * medium for `local`. Everything here happens before any disk is touched; a checksum mismatch ends
 * the install here.
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

export async function fetchInstallIso(
  media: MediaSource,
  workDir: string,
  opts: Omit<DownloadOptions, 'log'> & { log?: Logger } = {},
): Promise<InstallIso> {
  if (media.kind === 'none') {
    throw new HvError('iso_url is required in automatic installation', { where: 'install.iso_url', hint: 'set install.iso_url to an http(s) URL of the ISO, or "local"', exitCode: ExitCode.checkFailed });
  }
  if (media.kind === 'local') {
    const dev = await findLocalIso();
    opts.log?.info('using the boot medium as the install ISO', { device: dev });
    return { path: dev, verified: false, source: 'local' };
  }
  let sha256 = opts.sha256?.toLowerCase();
  if (!sha256) {
    sha256 = await fetchPublishedSha256(media.url, { caFile: opts.caFile }).catch((err: Error) => {
      opts.log?.warn('could not fetch the published sha256 of the ISO', { url: `${media.url}.sha256`, error: err.message });
      return undefined;
    });
    if (!sha256) opts.log?.warn('no sha256 for the ISO: it will not be verified', { url: media.url, hint: 'publish <iso_url>.sha256 or pass the checksum' });
  }
  const dest = path.join(workDir, 'install.iso');
  const r = await downloadFile(media.url, dest, { ...opts, sha256 });
  opts.log?.info('install ISO ready', { path: r.path, bytes: r.bytes, sha256: r.sha256, verified: !!sha256, resumed: r.resumed });
  return { path: r.path, sha256: r.sha256, verified: !!sha256, source: media.url };
}
