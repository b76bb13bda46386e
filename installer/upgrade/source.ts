/**
 * `--source` of an upgrade: a directory tree, a squashfs, an ISO (its rootfs.squashfs, as
 * Harvester's upgrade takes it from the upgrade repo's ISO), or an http(s) URL of either, which is
 * downloaded with resume and checked against its sha256 (--sha256, else the published
 * `<URL>.sha256`) before anything on the node changes.
 */
import { open, stat } from 'node:fs/promises';
import path from 'node:path';
import { ExitCode, HvError } from '../../lib/errors.js';
import type { Logger } from '../../lib/logger.js';
import type { OsSource } from '../disk/contracts.js';
import { downloadFile } from '../remote/iso.js';
import { fetchPublishedSha256 } from '../remote/install-media.js';
import { openIsoMedia } from '../remote/media.js';

export interface UpgradeSource {
  source: OsSource;
  /** Elemental's source URI for state.yaml. */
  uri: string;
  describe: string;
  release(): Promise<void>;
}

/** What a file is, from its magic: an ISO 9660 image ("CD001" at 32769) or a squashfs ("hsqs"). */
export function fileKind(head: Buffer): 'iso' | 'squashfs' | 'other' {
  if (head.subarray(0, 4).toString('latin1') === 'hsqs') return 'squashfs';
  if (head.length >= 32774 && head.subarray(32769, 32774).toString('latin1') === 'CD001') return 'iso';
  return 'other';
}

async function readHead(file: string): Promise<Buffer> {
  const fh = await open(file, 'r');
  try {
    const buf = Buffer.alloc(32774);
    const { bytesRead } = await fh.read(buf, 0, buf.length, 0);
    return buf.subarray(0, bytesRead);
  } finally {
    await fh.close();
  }
}

async function download(url: string, workDir: string, sha256: string | undefined, log: Logger, caFile?: string): Promise<string> {
  const expected = sha256 ?? (await fetchPublishedSha256(url, { caFile }).catch(() => undefined));
  if (!expected) {
    throw new HvError(`no sha256 for ${url}: an upgrade image over the network must be checked before it is installed`, {
      where: 'upgrade: --source',
      hint: `pass --sha256 HEX, or publish ${url}.sha256 beside it`,
      exitCode: ExitCode.usage,
    });
  }
  const dest = path.join(workDir, `upgrade-source${path.extname(new URL(url).pathname) || '.img'}`);
  log.info('downloading the upgrade image', { url, dest });
  await downloadFile(url, dest, { sha256: expected, caFile, log });
  return dest;
}

export async function openUpgradeSource(spec: string, opts: { workDir: string; sha256?: string; caFile?: string; log: Logger }): Promise<UpgradeSource> {
  const file = /^https?:\/\//.test(spec) ? await download(spec, opts.workDir, opts.sha256, opts.log, opts.caFile) : path.resolve(spec);
  const st = await stat(file).catch(() => undefined);
  const none = async (): Promise<void> => undefined;
  if (st?.isDirectory()) return { source: { kind: 'dir', path: file }, uri: `dir://${file}`, describe: `the directory ${file}`, release: none };
  const kind = st?.isFile() ? fileKind(await readHead(file)) : 'other';
  if (kind === 'squashfs') return { source: { kind: 'squashfs', path: file }, uri: `file://${file}`, describe: `the squashfs ${file}`, release: none };
  if (kind === 'iso') {
    const media = await openIsoMedia(file, opts.workDir, { paths: ['/rootfs.squashfs'], log: opts.log });
    const rootfs = path.join(media.root, 'rootfs.squashfs');
    if (!(await stat(rootfs).catch(() => undefined))?.isFile()) {
      await media.close();
      throw new HvError(`the ISO ${file} has no rootfs.squashfs`, { where: 'upgrade: --source', hint: 'pass a Harvester ISO, its rootfs.squashfs, or a directory tree', exitCode: ExitCode.usage });
    }
    return { source: { kind: 'squashfs', path: rootfs }, uri: `file://${file}#rootfs.squashfs`, describe: `rootfs.squashfs of the ISO ${file}`, release: () => media.close() };
  }
  throw new HvError(`the upgrade source ${spec} is ${st ? 'neither a directory, a squashfs nor an ISO' : 'not there'}`, {
    where: 'upgrade: --source',
    hint: 'pass a directory tree, a squashfs (rootfs.squashfs), an ISO, or an http(s) URL of one with its sha256',
    exitCode: ExitCode.usage,
  });
}
